"""Runner: measures LLM serving speed through real vLLM servers (an external program)."""
