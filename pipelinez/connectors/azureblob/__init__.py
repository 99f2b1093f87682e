"""The `azureblob` connector: Azure Blob Storage containers."""
