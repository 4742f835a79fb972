"""The AWS Batch-compatible endpoint (/aws/batch/): AWS's rest-json wire format, SigV4, and
one module of operations per kind of resource, each calling the domain's services."""
