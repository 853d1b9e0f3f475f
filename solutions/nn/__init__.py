"""Neural-network layers on top of the autograd engine, with PyTorch's names and conventions.

Book: chapters 5 and 6 (`book/05_layers.md`, `book/06_training.md`).
Tests: `tests/engine/test_layers.py`, `tests/engine/test_training.py`, `tests/engine/test_nn_golden.py`.

    >>> import numpy as np
    >>> from solutions import nn
    >>> model = nn.Sequential(nn.Linear(64, 32, rng=0), nn.ReLU(), nn.Linear(32, 10, rng=1))
    >>> [name for name, _ in model.named_parameters()]
    ['0.weight', '0.bias', '2.weight', '2.bias']
"""
from . import functional, init
from .attention import (
    Embedding,
    LearnedPositionalEncoding,
    MultiheadAttention,
    SinusoidalPositionalEncoding,
    TransformerBlock,
)
from .layers import (
    ELU,
    GELU,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    Conv2d,
    ConvTranspose2d,
    CrossEntropyLoss,
    Dropout,
    Flatten,
    Hardtanh,
    Identity,
    LayerNorm,
    LeakyReLU,
    Linear,
    MaxPool2d,
    MSELoss,
    NLLLoss,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softplus,
    Tanh,
)
from .module import LoadResult, Module, ModuleBase, Parameter, Sequential
from .numerical import numerical_gradient

__all__ = [
    "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "Conv2d", "ConvTranspose2d", "CrossEntropyLoss", "Dropout", "ELU",
    "Embedding", "LearnedPositionalEncoding", "MultiheadAttention", "SinusoidalPositionalEncoding", "TransformerBlock",
    "Flatten", "GELU", "Hardtanh", "Identity", "LayerNorm", "LeakyReLU", "Linear", "LoadResult", "MSELoss",
    "MaxPool2d", "Module", "ModuleBase", "NLLLoss", "Parameter", "ReLU", "ReLU6", "Sequential", "SiLU", "Sigmoid",
    "Softplus", "Tanh", "functional", "init", "numerical_gradient",
]
