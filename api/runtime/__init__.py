"""The sagemaker-runtime wire: InvokeEndpoint and InvokeEndpointWithResponseStream."""
