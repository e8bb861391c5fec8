"""``python -m bench`` runs bench/run.py (encode throughput vs tiktoken/tokenizers/sentencepiece)."""

from bench.run import main

main()
