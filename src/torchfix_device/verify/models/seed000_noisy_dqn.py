"""Seed 000 (a DQN with a noisy-network head): the noise is drawn on the CPU.

``NoisyLinear.reset_noise()`` runs at every forward pass and draws its factorised noise with
``torch.randn(n)``, which has no ``device=``. The result is assigned over the registered
``epsilon_*`` buffers, so after ``model.to(device)`` the buffers are back on the CPU while the
``mu_*`` / ``sigma_*`` weights are on the GPU, and ``forward`` fails with ``Expected all tensors to
be on the same device, but found at least two devices, cuda:0 and cpu!``. The head also wraps
the noise in ``torch.autograd.Variable``, as code of that era did.

The rewrite (TFD003) gives each ``torch.randn`` the device of one of the layer's own parameters.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

CODEMODS = ("TFD003",)


class NoisyLinear(nn.Module):
    def __init__(self, in_features, out_features, sigma_zero=0.4):
        super(NoisyLinear, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in_features)
        self.mu_weight = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.mu_bias = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        self.sigma_weight = nn.Parameter(torch.full((out_features, in_features), sigma_zero * bound))
        self.sigma_bias = nn.Parameter(torch.full((out_features,), sigma_zero * bound))
        self.register_buffer("epsilon_in", torch.FloatTensor(in_features))
        self.register_buffer("epsilon_out", torch.FloatTensor(out_features))
        self.reset_noise()

    @staticmethod
    def _scale(noise):
        return noise.sign() * noise.abs().sqrt()

    def reset_noise(self):
        noise_in = torch.randn(self.in_features)
        noise_out = torch.randn(self.out_features)
        self.epsilon_in = self._scale(noise_in)
        self.epsilon_out = self._scale(noise_out)

    def forward(self, x):
        self.reset_noise()
        if self.training:
            epsilon_weight = self.epsilon_out.ger(self.epsilon_in)
            weight = self.mu_weight + self.sigma_weight.mul(Variable(epsilon_weight))
            bias = self.mu_bias + self.sigma_bias.mul(Variable(self.epsilon_out))
        else:
            weight, bias = self.mu_weight, self.mu_bias
        return F.linear(x, weight, bias)


class NoisyDQN(nn.Module):
    def __init__(self, n_observations, n_actions, hidden=16):
        super(NoisyDQN, self).__init__()
        self.features = nn.Sequential(nn.Linear(n_observations, hidden), nn.ReLU())
        self.noisy_hidden = NoisyLinear(hidden, hidden)
        self.noisy_out = NoisyLinear(hidden, n_actions)

    def forward(self, state):
        h = self.features(state)
        h = F.relu(self.noisy_hidden(h))
        return self.noisy_out(h)


def run(device):
    model = NoisyDQN(n_observations=4, n_actions=2).to(device)
    states = torch.randn(8, 4).to(device)
    q_values = model(states)
    actions = q_values.argmax(dim=1)
    return model, (q_values, actions)
