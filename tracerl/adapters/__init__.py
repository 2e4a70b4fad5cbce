"""Framework adapters: one module per framework, each an idempotent instrument()/uninstrument()
pair on the framework's own hooks (LangChain callbacks, Agents SDK processors, LiteLLM
CustomLogger). Built in the adapters issue; until then third-party instrumentors
(OpenInference, OpenLLMetry) inside a ``tracerl.session`` already produce usable spans."""
