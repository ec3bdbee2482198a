"""cp-agent: the node agent of the AI-module array control plane.

Standalone: it imports no Django and nothing from the control plane, only
httpx, psutil and prometheus_client (plus numpy/onnx/onnxruntime for the
reference backend). It speaks the wire contract of docs/agent-protocol.md.
"""

__version__ = "1.1.0"
