"""Model backends behind one interface (P15, M1-M5): requests in, raw answers out; runners check them."""
