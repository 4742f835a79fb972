"""Web pages: each view parses input, calls one service or selector, and renders."""
