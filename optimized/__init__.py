"""Fast decoders over the model's K/V cache API, run through the same conformance tests as the reference."""
