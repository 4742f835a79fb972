"""Finding the host's GPUs through NVML."""

from __future__ import annotations


def detect_gpus() -> tuple[list[int], str]:
    """GPU indices NVML reports, and a note on why there are none when there are none."""
    try:
        import pynvml
    except ImportError:
        return [], "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
        try:
            return list(range(pynvml.nvmlDeviceGetCount())), ""
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError as err:
        return [], f"NVML: {err}"
