"""DQN head with NoisyNet layers (the seed-000 bug: noise drawn on the CPU)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


class NoisyLinear(nn.Module):
    def __init__(self, num_in, num_out, sigma0=0.5):
        super(NoisyLinear, self).__init__()
        self.num_in = num_in
        self.num_out = num_out
        self.mu_weight = nn.Parameter(torch.FloatTensor(num_out, num_in))
        self.mu_bias = nn.Parameter(torch.FloatTensor(num_out))
        self.sigma_weight = nn.Parameter(torch.FloatTensor(num_out, num_in))
        self.sigma_bias = nn.Parameter(torch.FloatTensor(num_out))
        self.register_buffer("epsilon_i", torch.FloatTensor(num_in))
        self.register_buffer("epsilon_j", torch.FloatTensor(num_out))
        self.sigma0 = sigma0
        self.reset_parameters()
        self.reset_noise()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.num_in)
        self.mu_weight.data.uniform_(-bound, bound)
        self.mu_bias.data.uniform_(-bound, bound)
        self.sigma_weight.data.fill_(self.sigma0 * bound)
        self.sigma_bias.data.fill_(self.sigma0 * bound)

    def reset_noise(self):
        eps_i = torch.randn(self.num_in)
        eps_j = torch.randn(self.num_out)
        self.epsilon_i = eps_i.sign() * eps_i.abs().sqrt()
        self.epsilon_j = eps_j.sign() * eps_j.abs().sqrt()

    def forward(self, x):
        weight = self.mu_weight + self.sigma_weight * torch.ger(self.epsilon_j, self.epsilon_i)
        bias = self.mu_bias + self.sigma_bias * self.epsilon_j
        return F.linear(x, weight, bias)


class NoisyDQN(nn.Module):
    def __init__(self, num_inputs, num_actions):
        super(NoisyDQN, self).__init__()
        self.fc = nn.Linear(num_inputs, 64)
        self.noisy = NoisyLinear(64, num_actions)

    def forward(self, x):
        return self.noisy(F.relu(self.fc(x)))

    def act(self, state):
        state = Variable(torch.FloatTensor(state).unsqueeze(0), volatile=True)
        q_value = self.forward(state)
        return q_value.max(1)[1].data[0]
