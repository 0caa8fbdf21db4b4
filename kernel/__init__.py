"""The kernel: what every other package may import; it imports none of them."""
