"""Hidden suite for the `ppo` kata: the PPO loss for RLHF. Level 1 the clipped policy loss,
level 2 GAE and the clipped value loss, level 3 KL-shaped rewards, masked whitening and the
full loss.

    strategies.py    right-padded (B, T) batches on a grid of eighths, FIXED_MASKS (the edge
                     layouts: one valid token, T = 1, no padding, uneven rows)
    checks.py        scalars and stats, gradients, ValueError looked at forward (the next
                     call after a rejected one), unchanged inputs, low-precision results
    runners.py       one runner per function (call, check the form, run backward) and the
                     input builders of each level
    test_level1.py   RULES map + ppo_policy_loss
    test_level2.py   RULES map + compute_gae, ppo_value_loss
    test_level3.py   RULES map + kl_shaped_rewards, masked_whiten, ppo_loss

Every function is pure, so "no state leaks" means: inputs are never modified, and after a
rejected call the next valid call returns exactly what it returned before.
"""
