"""Train the small ResNet (legacy style: .cuda(), loss.data[0], a resume checkpoint)."""
import argparse

import torch
import torch.nn as nn
import torch.optim as optim

from models.resnet import SmallResNet

parser = argparse.ArgumentParser()
parser.add_argument("--cuda", action="store_true", help="train on the GPU")
parser.add_argument("--resume", default="")
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()

model = SmallResNet()
criterion = nn.CrossEntropyLoss()
if args.cuda:
    model.cuda()
    criterion.cuda()

optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
if args.resume:
    state = torch.load(args.resume)
    model.load_state_dict(state["model"])


def batches(n=4):
    for _ in range(n):
        yield torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))


for epoch in range(args.epochs):
    total_loss = 0
    for images, labels in batches():
        if args.cuda:
            images, labels = images.cuda(), labels.cuda(non_blocking=True)
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        total_loss += loss.data[0]
    print("epoch %d loss %.3f" % (epoch, total_loss))

torch.save({"model": model.state_dict()}, "checkpoint.pt")
