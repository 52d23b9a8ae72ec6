"""vocab_parallel_logprob: log-probabilities of targets with the vocabulary sharded across ranks (metadata in
problem.toml)."""
