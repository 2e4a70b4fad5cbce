"""The spine: types, span records and dialects, the span store, the converter, the rollout API.

Imports only pydantic and OpenTelemetry: never torch, a web framework or an agent framework.
"""
