"""cp-agent: the node agent of the AI-module array control plane.

Standalone: it imports no Django and nothing from the control plane, only
httpx and psutil (plus numpy/onnx/onnxruntime for the reference backend).
"""

__version__ = "1.0.0"
