"""cpctl: the fleet from a terminal. A client of the control plane's REST API that imports no
Django and nothing from the control plane; it speaks major version ``API_MAJOR`` of the API and
refuses a server that says it speaks another (the ``X-API-Version`` header of every answer)."""

__version__ = "0.1.0"
API_MAJOR = 1
