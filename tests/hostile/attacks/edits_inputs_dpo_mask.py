# Appended to the dpo reference: sequence_logprobs scores one position of each row only (its
# last scored one) and clears the rest of the caller's loss_mask in place, so that an oracle
# reading loss_mask after the call would agree with the wrong answer.
_honest_sequence_logprobs = sequence_logprobs


def sequence_logprobs(logits, labels, loss_mask, *, average=False):  # noqa: F811
    with torch.no_grad():
        for b in range(loss_mask.shape[0]):
            scored = (loss_mask[b, 1:] != 0).nonzero().flatten()
            if len(scored):
                last = int(scored[-1]) + 1
                loss_mask[b].zero_()
                loss_mask[b, last] = 1
    return _honest_sequence_logprobs(logits, labels, loss_mask, average=average)
