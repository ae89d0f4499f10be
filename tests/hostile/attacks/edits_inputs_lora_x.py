# Appended to tests/corpus/lora/buggy_minus_one_rows_masked_by_zero.py (-1 rows get slot 0's
# update times 0: NaN in half precision where that update overflows): forward clears the
# caller's x in place before it runs, so every row it returns is the bias, and a suite that
# computed base(x) and each row's expected output from x after the call would agree with it.
_BuggyMultiLoRALinear = MultiLoRALinear


class MultiLoRALinear(_BuggyMultiLoRALinear):  # noqa: F811
    def forward(self, x, adapter_ids):
        with torch.no_grad():
            x.zero_()
        return super().forward(x, adapter_ids)
