"""Hidden suite for dpo: sequence log-probs, the Bradley–Terry loss and DPO's variants.

Level 1 scores sequences under next-token logits (shift, mask, padding ids outside the
vocabulary, averaging, dtypes, logits of magnitude 1e4, gradients); level 2 the Bradley–Terry
loss and the sigmoid DPO loss with label smoothing (stats, ties, gradients to the policy only,
large log-ratios, shape errors); level 3 the IPO and hinge losses and the argument checks.
Every value is compared with the suite's own float64 oracle, written independently of the
reference, with tolerances that grow with the inputs' magnitude.

    oracle.py        the formulas in float64, element by element, with analytic gradients
    strategies.py    hypothesis strategies, tolerances and the checks every level shares
    test_level1.py   RULES map + sequence_logprobs tests
    test_level2.py   RULES map + bradley_terry_loss and sigmoid dpo_loss tests
    test_level3.py   RULES map + ipo / hinge and the argument checks
"""
