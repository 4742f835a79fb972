"""qp: quotaportal from a terminal. It talks to the portal's REST API only (`qp --help`)."""
