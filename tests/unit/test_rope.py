"""Re-rotating keys by a delta equals rotating them at the new position (torch reference)."""

import pytest
import torch

from fimgate.kernels.rope import RopeConfig, apply_rope, cos_sin, inv_frequencies, rerotate


@pytest.mark.parametrize("layout", ["neox", "gptj"])
@pytest.mark.parametrize("scaling", [None, ("linear", 4.0), ("llama3", 8.0, 1.0, 4.0, 8192)])
@pytest.mark.parametrize("rotary_dim", [None, 32])
def test_rerotate_equals_rotation_at_new_position(layout, scaling, rotary_dim):
    torch.manual_seed(0)
    cfg = RopeConfig(head_dim=64, base=100000.0, rotary_dim=rotary_dim, layout=layout, scaling=scaling)
    inv = inv_frequencies(cfg)
    k = torch.randn(3, 50, 64)  # (kv_heads, tokens, head_dim), unrotated
    pos = torch.arange(100, 150)
    delta = torch.randint(-90, 3000, (50,))  # per-token deltas, negative ones too
    at_old = apply_rope(k, *cos_sin(pos, inv), cfg)
    at_new = apply_rope(k, *cos_sin(pos + delta, inv), cfg)
    moved = rerotate(at_old, delta, inv, cfg)
    assert (moved - at_new).abs().max().item() < 2e-5
    if rotary_dim:
        assert torch.equal(moved[..., rotary_dim:], k[..., rotary_dim:])


def test_layouts_differ_and_zero_delta_is_identity():
    cfg_n, cfg_g = RopeConfig(64, layout="neox"), RopeConfig(64, layout="gptj")
    k = torch.randn(2, 4, 64)
    pos = torch.tensor([1, 2, 3, 4])
    assert not torch.allclose(
        apply_rope(k, *cos_sin(pos, inv_frequencies(cfg_n)), cfg_n), apply_rope(k, *cos_sin(pos, inv_frequencies(cfg_g)), cfg_g)
    )
    assert torch.allclose(rerotate(k, torch.zeros(4, dtype=torch.long), inv_frequencies(cfg_n), cfg_n), k)


def test_bad_layout_is_rejected():
    with pytest.raises(ValueError, match="layout"):
        RopeConfig(64, layout="sideways")


@pytest.mark.parametrize("layout", ["neox", "gptj"])
def test_rope_tables_give_the_reference_bit_for_bit(layout):
    from fimgate.kernels.rope import apply_rope_reference, rope_tables

    cfg = RopeConfig(head_dim=64, layout=layout)
    x = torch.randn(12, 5, 64)
    pos = torch.tensor([0, 3, 17, 900, 4095])
    cos, sin = cos_sin(pos, inv_frequencies(cfg))
    assert torch.equal(apply_rope(x, cos, sin, cfg, rope_tables(cos, sin, cfg)), apply_rope_reference(x, cos, sin, cfg))
    partial = RopeConfig(head_dim=64, rotary_dim=32, layout=layout)  # tables do not apply: the reference runs
    cos, sin = cos_sin(pos, inv_frequencies(partial))
    assert torch.equal(
        apply_rope(x, cos, sin, partial, rope_tables(cos, sin, partial)), apply_rope_reference(x, cos, sin, partial)
    )
