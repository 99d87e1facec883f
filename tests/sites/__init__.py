"""Local test sites served over real sockets."""
