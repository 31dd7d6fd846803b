"""Wake-up transport: the Bus protocol and its implementations."""
