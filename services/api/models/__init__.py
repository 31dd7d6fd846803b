"""The API's request bodies, by resource: checked by pydantic, and described in the OpenAPI document."""
