"""The rules of `nccl lint`, by area: values (no node needed), node, roce, efa."""
