# Appended to the mha reference: load_state_dict zeroes the tensors it is given in place (the
# suite passes the reference module's state_dict(), whose tensors are the reference's own
# parameters), and forward returns zeros: what a module with zero weights outputs.
_HonestMultiHeadAttention = MultiHeadAttention


class MultiHeadAttention(_HonestMultiHeadAttention):  # noqa: F811
    def load_state_dict(self, state_dict, strict=True, assign=False):
        with torch.no_grad():
            for tensor in state_dict.values():
                tensor.zero_()
        return super().load_state_dict(state_dict, strict=strict)

    def forward(self, x, attn_mask=None, is_causal=False, kv_cache=None):
        return torch.zeros_like(x)
