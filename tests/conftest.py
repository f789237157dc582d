"""Shared by the tests: a test that takes `device` runs on the CPU, and on CUDA where a CUDA device is present."""

import pytest
import torch

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)
