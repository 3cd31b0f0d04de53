"""Evaluation helpers (seed 004: eval_model forgets to keep the moved tensors)."""
import torch


def eval_model(model, loader, device):
    model.eval()
    correct, seen = 0, 0
    with torch.no_grad():
        for X, y in loader:
            X.to(device)
            y.to(device)
            pred = model(X).argmax(dim=1)
            correct += (pred == y).sum().data[0]
            seen += y.size(0)
    return correct / seen


def confusion(num_classes, predictions, labels):
    matrix = torch.cuda.LongTensor(num_classes, num_classes).zero_()
    for p, t in zip(predictions, labels):
        matrix[t, p] += 1
    return matrix
