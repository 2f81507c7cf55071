"""`python -m vllm.entrypoints.openai.api_server ...` where testkit/fake_vllm/shim leads PYTHONPATH:
the fake vLLM (testkit/fake_vllm/process.py) in place of the real one."""

from testkit.fake_vllm.process import main

if __name__ == "__main__":
    main()
