"""Operations around calls: approvals, outcome resolution, compensation, batches, registry."""
