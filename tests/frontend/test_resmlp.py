"""The `resmlp` family (Gorishniy et al. 2021's ResNet): spec strings, its IR and patterns, and
end-to-end training through the executor with the loss curve of an independent PyTorch twin."""

from __future__ import annotations

import numpy as np
import pytest

from aicf_induct.errors import ConfigError
from aicf_induct.frontend.families import ResMLPSpec, parse_spec, spec_graph
from aicf_induct.ir.patterns import patterns
from aicf_induct.problems import load_problem
from aicf_induct.runtime.trainer import TrainConfig, Trainer


def test_spec_round_trip_and_errors() -> None:
    s = parse_spec("resmlp:blocks=3,d=32,d_hidden=48,dropout1=0.2,norm=layernorm")
    assert s == ResMLPSpec(blocks=3, d=32, d_hidden=48, dropout1=0.2, norm="layernorm")
    assert parse_spec(str(s)) == s
    with pytest.raises(ConfigError, match="unknown model key 'width' for resmlp"):
        parse_spec("resmlp:width=3")
    with pytest.raises(ConfigError, match=r"'dropout2' must be a float in \[0, 1\)"):
        parse_spec("resmlp:dropout2=1.0")
    with pytest.raises(ConfigError, match=r"bad value 'none' for model key 'norm'"):
        parse_spec("resmlp:norm=none")


def test_graph_and_patterns() -> None:
    g = spec_graph(ResMLPSpec(blocks=2, d=16, d_hidden=24, dropout1=0.1, dropout2=0.05), 7, 3)
    ops = [n.op for n in g.nodes]
    assert ops.count("add") == 2 and ops.count("batchnorm") == 3 and ops.count("dropout") == 4
    assert g.node("blocks.0.branch.0").attrs["out_features"] == 24
    p = patterns(g)
    assert p["resblock.count"] == 2 and p["resblock.d_hidden"] == 24
    assert p["residual.count"] == 2 and "attention.blocks" not in p
    # without dropout the blocks drop their dropout nodes
    g0 = spec_graph(ResMLPSpec(blocks=1, d=8, d_hidden=8), 4, 2)
    assert "dropout" not in [n.op for n in g0.nodes]


def _torch_twin(torch: object, spec: ResMLPSpec, n_in: int, n_out: int) -> object:
    """The same network written in plain PyTorch, modules named as the IR names parameters."""
    nn = torch.nn  # type: ignore[attr-defined]

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.branch = nn.Sequential(nn.Linear(spec.d, spec.d_hidden),
                                        nn.BatchNorm1d(spec.d_hidden), nn.ReLU(),
                                        nn.Linear(spec.d_hidden, spec.d))

        def forward(self, x: object) -> object:
            return x + self.branch(x)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Linear(n_in, spec.d)
            self.blocks = nn.Sequential(*[Block() for _ in range(spec.blocks)])
            self.head = nn.Sequential(nn.BatchNorm1d(spec.d), nn.ReLU(), nn.Linear(spec.d, n_out))

        def forward(self, x: object) -> object:
            return self.head(self.blocks(self.stem(x)))

    return Net().double()


def test_trains_through_the_executor_as_pytorch_does() -> None:
    torch = pytest.importorskip("torch")
    problem = load_problem("digits", seed=0)
    spec = ResMLPSpec(blocks=2, d=32, d_hidden=48)
    graph = spec_graph(spec, problem.n_features, problem.n_outputs)
    cfg = TrainConfig(optimizer="adam", lr=3e-3, batch_size=32, backend="numpy")
    trainer = Trainer(problem, graph, cfg)
    net = _torch_twin(torch, spec, problem.n_features, problem.n_outputs)
    store = trainer.store
    values = {**store.params, **store.buffers}
    with torch.no_grad():
        for name, t in net.state_dict().items():
            if name.endswith("num_batches_tracked"):
                continue
            t.copy_(torch.from_numpy(np.array(values[name])))  # KeyError: a name differs
    net.train()
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    ours, theirs = [], []
    for idx in list(trainer.stream.epoch(0))[:40]:
        x, y = problem.train.X[idx], problem.train.y[idx]
        ours.append(trainer.train_step(x, y, 0).loss)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        opt.step()
        theirs.append(loss.item())
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    assert ours[-1] < 0.6 * ours[0]  # it learned
    values = {**trainer.store.params, **trainer.store.buffers}
    for name, t in net.state_dict().items():
        if not name.endswith("num_batches_tracked"):  # running statistics too
            np.testing.assert_allclose(values[name], t.numpy(), rtol=1e-6, atol=1e-9)
