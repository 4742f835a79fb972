"""quotaportal-agent: runs on each GPU host, runs the jobs the control plane places there.

Standard library only (plus nvidia-ml-py to find GPUs), so it installs anywhere.
"""
