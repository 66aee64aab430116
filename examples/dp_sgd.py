"""β-DP-SGD in a plain Opacus training loop (the style of Opacus's examples/mnist.py): the only changes are
the import and ``beta=``. Built-in data (two Gaussian classes in 20 dimensions), so it runs anywhere in seconds.

    python examples/dp_sgd.py --beta 1.5 --epochs 3 --sigma 1.0 -c 1.0
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from opacus_gg import GGPrivacyEngine  # was: from opacus import PrivacyEngine
from opacus_gg.formatting import fmt_up


def make_data(n: int, seed: int) -> TensorDataset:
    """x ~ N(±0.5·1, I) in 20 dimensions, label = the sign."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    return TensorDataset(torch.randn(n, 20, generator=g) + (y[:, None] - 0.5), y)


def train(args, model, train_loader, optimizer, privacy_engine, epoch):
    model.train()
    losses = []
    for data, target in train_loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    epsilon = privacy_engine.get_epsilon(delta=args.delta)  # certified upper bound, printed rounded up
    print(f"Train Epoch: {epoch} \tLoss: {sum(losses) / len(losses):.6f} (ε ≤ {fmt_up(epsilon)}, δ = {args.delta})")


def test(model, test_loader):
    model.eval()
    with torch.no_grad():
        correct = sum((model(x).argmax(1) == y).sum().item() for x, y in test_loader)
    accuracy = correct / len(test_loader.dataset)
    print(f"Test set: Accuracy: {correct}/{len(test_loader.dataset)} ({100 * accuracy:.2f}%)")
    return accuracy


def main():
    parser = argparse.ArgumentParser(description="β-DP-SGD with GGPrivacyEngine")
    parser.add_argument("--beta", type=float, default=1.5, help="GG noise shape (2 = Opacus's Gaussian)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="expected Poisson batch size")
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--sigma", type=float, default=1.0, help="noise multiplier")
    parser.add_argument("-c", "--max-per-sample-grad-norm", type=float, default=1.0, help="clip norm C (ℓ_β)")
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    train_loader = DataLoader(make_data(args.n_train, args.seed), batch_size=args.batch_size)
    test_loader = DataLoader(make_data(1000, args.seed + 1), batch_size=256)
    model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

    privacy_engine = GGPrivacyEngine()
    model, optimizer, train_loader = privacy_engine.make_private(
        module=model, optimizer=optimizer, data_loader=train_loader,
        noise_multiplier=args.sigma, max_grad_norm=args.max_per_sample_grad_norm, beta=args.beta,
    )
    for epoch in range(1, args.epochs + 1):
        train(args, model, train_loader, optimizer, privacy_engine, epoch)
    test(model, test_loader)


if __name__ == "__main__":
    main()
