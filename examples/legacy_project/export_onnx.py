"""Export a saved model to ONNX (seed 002: the model went to the GPU, the input did not)."""
import torch

model = torch.load("model.pt").cuda()
model.eval()
dummy_input = torch.randn(1, 3, 32, 32)
dummy_input.cuda()
torch.onnx.export(model, dummy_input, "model.onnx")
