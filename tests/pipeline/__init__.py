"""The stages' algorithms: documents and inputs, sentences, tokenizers, instances, masking, mixing, packing."""
