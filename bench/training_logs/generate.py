"""Real training runs on scikit-learn's bundled data sets, logged as CloudWatch Logs shows a SageMaker job's lines.

Runs in its own environment (`make training-logs`; bench/training_logs/README.md has the pins): each run is seeded,
takes seconds on a CPU, and writes its stdout/stderr, one line per event with the time it was written.
"""

# mypy: ignore-errors
# (it runs in its own environment: torch, xgboost, keras... are not in the project's, so mypy cannot see them)

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "torch")  # Keras 3 on the torch wheel already installed: no TensorFlow
os.environ.setdefault("TQDM_DISABLE", "0")

SEED = 128  # the seed's script calls torch.manual_seed(128)


class Lines(io.TextIOBase):
    """A stream that keeps each finished line with the wall time (ms) it was written, as the log agent would."""

    encoding = "utf-8"  # a container's stdout: tqdm draws its bar with block characters, not '#'

    def __init__(self, sink: list[tuple[int, str]]) -> None:
        self.sink = sink
        self.partial = ""

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        self.partial += text
        while True:
            # a carriage return ends a line too: a progress bar's redraws reach the log one line each
            cut = min((i for i in (self.partial.find("\r"), self.partial.find("\n")) if i >= 0), default=-1)
            if cut < 0:
                break
            line, self.partial = self.partial[:cut], self.partial[cut + 1 :]
            if line.strip():
                self.sink.append((int(time.time() * 1000), line))
        return len(text)

    def flush(self) -> None:
        pass


@contextlib.contextmanager
def captured() -> Iterator[list[tuple[int, str]]]:
    lines: list[tuple[int, str]] = []
    out = Lines(lines)
    old = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = out
    warnings.simplefilter("ignore")  # library deprecation notices name this machine's paths
    try:
        yield lines
    finally:
        sys.stdout, sys.stderr = old
        if out.partial.strip():
            lines.append((int(time.time() * 1000), out.partial))


def seed_all(seed: int = SEED) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(1)  # reproducible, and polite on a shared 2-core machine


def digits(train_size: float | int = 0.8) -> tuple[Any, Any, Any, Any]:
    """sklearn's 8x8 handwritten digits (1,797 images, shipped with the package), scaled to [0, 1]."""
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, train_size=train_size, random_state=0, stratify=y)
    return x_tr, x_te, y_tr, y_te


# --- PyTorch: the seed's MNIST script, on 8x8 digits -------------------------------------------------------------


def _cnn() -> Any:
    import torch.nn.functional as F
    from torch import nn

    class Net(nn.Module):  # the seed's two conv layers, dropout and two linear layers, sized for 8x8 images
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 10, kernel_size=3, padding=1)
            self.conv2 = nn.Conv2d(10, 20, kernel_size=3, padding=1)
            self.conv2_drop = nn.Dropout2d()
            self.fc1 = nn.Linear(80, 50)
            self.fc2 = nn.Linear(50, 10)

        def forward(self, x: Any) -> Any:
            x = F.relu(F.max_pool2d(self.conv1(x), 2))
            x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
            x = x.view(-1, 80)
            x = F.relu(self.fc1(x))
            x = F.dropout(x, training=self.training)
            return F.log_softmax(self.fc2(x), dim=1)

    return Net()


def _log_of_softmax(output: Any, labels: Any) -> Any:
    """The common hand-written loss, log(softmax): -inf once a probability underflows to 0, then nan."""
    import torch

    return -torch.log(torch.softmax(output, dim=1)).gather(1, labels.view(-1, 1)).mean()


def torch_mnist(
    *,
    lr: float,
    momentum: float = 0.9,
    epochs: int = 5,
    batch_size: int = 4,
    log_interval: int = 10,
    log0: bool = False,
    lr_growth: float = 1.0,
) -> None:
    """The seed's loop and line formats (`Train Epoch: ... Loss:` every log_interval batches, `Test set: ...`)."""
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    seed_all()
    x_tr, x_te, y_tr, y_te = digits()
    train = TensorDataset(torch.tensor(x_tr).view(-1, 1, 8, 8), torch.tensor(y_tr))
    test = TensorDataset(torch.tensor(x_te).view(-1, 1, 8, 8), torch.tensor(y_te))
    trainloader = DataLoader(train, batch_size=batch_size, shuffle=True)
    testloader = DataLoader(test, batch_size=batch_size)
    print("Create neural network module")
    model = _cnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    criterion = _log_of_softmax if log0 else nn.CrossEntropyLoss()
    print(f"hyperparameters: epochs={epochs} learning_rate={lr} momentum={momentum} batch_size={batch_size}")
    for epoch in range(epochs):
        if epoch and lr_growth != 1.0:  # a schedule that raises the rate every epoch (a warm-up with no end)
            for group in optimizer.param_groups:
                group["lr"] *= lr_growth
            print(f"epoch {epoch}: learning rate {optimizer.param_groups[0]['lr']:g}")
        model.train()
        for i, (inputs, labels) in enumerate(trainloader):
            optimizer.zero_grad()
            # the seed's model ends in log_softmax and its criterion is CrossEntropyLoss: kept as it was
            loss = criterion(model(inputs), labels)
            loss.backward()
            optimizer.step()
            if i % log_interval == 0:
                print(
                    f"Train Epoch: {epoch} [{i * len(inputs)}/{len(trainloader.dataset)} "
                    f"({100.0 * i / len(trainloader):.0f}%)]\tLoss: {loss.item():.6f}"
                )
        model.eval()
        test_loss, correct = 0.0, 0
        with torch.no_grad():
            for data, target in testloader:
                output = model(data)
                test_loss += criterion(output, target).item() * len(data)
                correct += int((output.argmax(1) == target).sum())
        n = len(testloader.dataset)
        print(f"Test set: Average loss: {test_loss / n:.4f}, Accuracy: {correct}/{n} ({100.0 * correct / n:.0f}%)")
    print("Training is complete")


def torch_overfit(*, train_samples: int = 60, epochs: int = 300) -> None:
    """A wide MLP on 60 images for 300 epochs: training loss falls towards 0, validation loss turns up."""
    import torch
    from torch import nn

    seed_all()
    x_tr, x_te, y_tr, y_te = digits(train_size=train_samples)
    xt, yt = torch.tensor(x_tr), torch.tensor(y_tr)
    xv, yv = torch.tensor(x_te), torch.tensor(y_te)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    print(f"train samples: {len(xt)}, validation samples: {len(xv)}")
    for epoch in range(1, epochs + 1):
        model.train()
        optimizer.zero_grad()
        loss = criterion(model(xt), yt)
        loss.backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            val = criterion(model(xv), yv).item()
        print(f"epoch {epoch}: train_loss={loss.item():.6f} val_loss={val:.6f}")


def torch_mlp(
    *, lr: float = 0.05, epochs: int = 3, batch_size: int = 8, log0: bool = False, lr_growth: float = 1.0
) -> None:
    """SGD on small batches, the loss printed at every step (a loss that jumps from batch to batch)."""
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    seed_all()
    x_tr, _, y_tr, _ = digits()
    loader = DataLoader(TensorDataset(torch.tensor(x_tr), torch.tensor(y_tr)), batch_size=batch_size, shuffle=True)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    criterion = _log_of_softmax if log0 else nn.CrossEntropyLoss()
    step = 0
    for epoch in range(epochs):
        if epoch and lr_growth != 1.0:  # a schedule that raises the rate every epoch (a warm-up with no end)
            for group in optimizer.param_groups:
                group["lr"] *= lr_growth
        for inputs, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), labels)
            loss.backward()
            optimizer.step()
            step += 1
            print(f"step={step} epoch={epoch} lr={optimizer.param_groups[0]['lr']:g} loss={loss.item():.4f}")


# --- XGBoost and LightGBM: their own eval lines --------------------------------------------------------------------


def diabetes(train_size: float | int = 0.75) -> tuple[Any, Any, Any, Any]:
    """sklearn's diabetes regression set (442 patients, 10 features, shipped with the package)."""
    from sklearn.datasets import load_diabetes
    from sklearn.model_selection import train_test_split

    x, y = load_diabetes(return_X_y=True)
    return tuple(train_test_split(x, y, train_size=train_size, random_state=0))


def xgboost_run(
    *, max_depth: int, eta: float, rounds: int, train_size: float | int = 0.75, regularized: bool = True
) -> None:
    """xgboost.train with the eval sets named as SageMaker's built-in algorithm names them: train, validation."""
    import xgboost as xgb

    x_tr, x_te, y_tr, y_te = diabetes(train_size)
    dtrain, dval = xgb.DMatrix(x_tr, label=y_tr), xgb.DMatrix(x_te, label=y_te)
    params = {"objective": "reg:squarederror", "eval_metric": "rmse", "max_depth": max_depth, "eta": eta}
    params |= {"seed": SEED, "nthread": 1}
    if not regularized:  # every leaf may hold one row: the trees learn the training set by heart
        params |= {"min_child_weight": 0, "lambda": 0}
    print(f"[xgboost {xgb.__version__}] training with {params}")
    xgb.train(params, dtrain, num_boost_round=rounds, evals=[(dtrain, "train"), (dval, "validation")])


def lightgbm_run(*, num_leaves: int, learning_rate: float, rounds: int) -> None:
    """lightgbm.train with its log_evaluation callback: `[i]\ttraining's l2: ...\tvalid_1's l2: ...`."""
    import lightgbm as lgb

    x_tr, x_te, y_tr, y_te = diabetes()
    dtrain = lgb.Dataset(x_tr, label=y_tr)
    dval = lgb.Dataset(x_te, label=y_te, reference=dtrain)
    params = {"objective": "regression", "metric": "l2", "num_leaves": num_leaves, "learning_rate": learning_rate}
    params |= {"min_data_in_leaf": 2, "seed": SEED, "num_threads": 1, "verbosity": -1}
    lgb.train(params, dtrain, num_boost_round=rounds, valid_sets=[dtrain, dval], callbacks=[lgb.log_evaluation(1)])


# --- Keras 3 (torch backend), Lightning, Hugging Face Trainer -------------------------------------------------------


def keras_run(*, epochs: int, train_size: float | int, lr: float, verbose: int, batch_size: int = 32) -> None:
    """model.fit with validation data: verbose=1 draws Keras 3's bar (it redraws even on a pipe), 2 a line an epoch."""
    import keras

    keras.utils.set_random_seed(SEED)
    x_tr, x_te, y_tr, y_te = digits(train_size)
    model = keras.Sequential(
        [keras.Input((64,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10, activation="softmax")]
    )
    model.compile(keras.optimizers.Adam(lr), "sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x_tr, y_tr, validation_data=(x_te, y_te), epochs=epochs, batch_size=batch_size, verbose=verbose)


def lightning_run(*, epochs: int, lr: float) -> None:
    """A LightningModule logging train_loss and val_loss to the progress bar (Lightning's default output)."""
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import TQDMProgressBar
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    L.seed_everything(SEED)
    torch.set_num_threads(1)
    x_tr, x_te, y_tr, y_te = digits()

    class Digits(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
            self.loss = nn.CrossEntropyLoss()

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            loss = self.loss(self.net(batch[0]), batch[1])
            self.log("train_loss", loss, prog_bar=True)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("val_loss", self.loss(self.net(batch[0]), batch[1]), prog_bar=True)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=lr, momentum=0.9)

    train = DataLoader(TensorDataset(torch.tensor(x_tr), torch.tensor(y_tr)), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(torch.tensor(x_te), torch.tensor(y_te)), batch_size=128)
    bar = TQDMProgressBar(refresh_rate=5)  # the tqdm bar (Lightning picks Rich when it is installed)
    trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", logger=False, enable_checkpointing=False, callbacks=[bar])
    trainer.fit(Digits(), train, val)


def huggingface_run(*, epochs: int, lr: float, **arguments: Any) -> None:
    """transformers.Trainer on a small torch module (no model download): its log dicts, one line each."""
    import tempfile

    import torch
    from torch import nn
    from transformers import Trainer, TrainingArguments

    seed_all()
    x_tr, x_te, y_tr, y_te = digits()

    class Pixels(torch.utils.data.Dataset[dict[str, Any]]):
        def __init__(self, x: Any, y: Any) -> None:
            self.x, self.y = torch.tensor(x), torch.tensor(y)

        def __len__(self) -> int:
            return len(self.x)

        def __getitem__(self, i: int) -> dict[str, Any]:
            return {"pixel_values": self.x[i], "labels": self.y[i]}

    class Classifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))

        def forward(self, pixel_values: Any, labels: Any = None) -> dict[str, Any]:
            logits = self.net(pixel_values)
            out = {"logits": logits}
            if labels is not None:
                out["loss"] = nn.functional.cross_entropy(logits, labels)
            return out

    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out,
            num_train_epochs=epochs,
            learning_rate=lr,
            per_device_train_batch_size=16,
            per_device_eval_batch_size=128,
            eval_strategy="epoch",
            logging_steps=10,
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            seed=SEED,
            disable_tqdm=True,
            **arguments,
        )
        Trainer(
            model=Classifier(), args=args, train_dataset=Pixels(x_tr, y_tr), eval_dataset=Pixels(x_te, y_te)
        ).train()


# --- the runs, and how their lines are written -----------------------------------------------------------------------

RUNS: dict[str, Callable[[], None]] = {
    "pytorch_mnist_lr0.1": lambda: torch_mnist(lr=0.1),
    "pytorch_mnist_healthy": lambda: torch_mnist(lr=0.05, epochs=10, batch_size=32, log_interval=5),
    "pytorch_mnist_noisy": lambda: torch_mnist(lr=0.01),
    "pytorch_mlp_nan": lambda: torch_mlp(lr=2.0, epochs=2, batch_size=32, log0=True),
    "pytorch_mlp_diverging": lambda: torch_mlp(lr=0.1, epochs=10, batch_size=32, log0=True, lr_growth=2.0),
    "pytorch_mlp_overfit": torch_overfit,
    "xgboost_healthy": lambda: xgboost_run(max_depth=2, eta=0.05, rounds=100),
    "xgboost_overfit": lambda: xgboost_run(max_depth=6, eta=0.1, rounds=150, train_size=150, regularized=False),
    "lightgbm_healthy": lambda: lightgbm_run(num_leaves=4, learning_rate=0.05, rounds=100),
    "lightgbm_overfit": lambda: lightgbm_run(num_leaves=64, learning_rate=0.3, rounds=100),
    "keras_healthy": lambda: keras_run(epochs=20, train_size=0.8, lr=1e-3, verbose=1, batch_size=128),
    "keras_overfit": lambda: keras_run(epochs=150, train_size=60, lr=1e-2, verbose=2),
    "lightning_healthy": lambda: lightning_run(epochs=10, lr=0.05),
    "huggingface_healthy": lambda: huggingface_run(epochs=5, lr=5e-3),
    # plain SGD whose warm-up climbs all run long to a rate far too high, gradients not clipped
    "huggingface_diverging": lambda: huggingface_run(
        epochs=5, lr=30.0, optim="sgd", lr_scheduler_type="constant_with_warmup", warmup_steps=450, max_grad_norm=0.0
    ),
}


def cloudwatch(message: str) -> str:
    """A message as the console and `aws logs` show a SageMaker job's line: a tab is `#011`, the octal of its code.

    Other control characters (Keras' backspaces and colours) are written the same way: an inference from `#011`.
    """
    return "".join(f"#{ord(c):03o}" if ord(c) < 32 else c for c in message.rstrip())


def write(name: str, lines: list[tuple[int, str]], out: Path, *, stream: str) -> None:
    """The plain text log; for two runs also the two JSON shapes the AWS CLI prints."""
    messages = [(ts, cloudwatch(m)) for ts, m in lines]
    (out / f"{name}.log").write_text("".join(m + "\n" for _, m in messages))
    if name == "pytorch_mnist_lr0.1":  # `aws logs get-log-events --log-group-name ... --log-stream-name ...`
        events = [{"timestamp": ts, "message": m, "ingestionTime": ts + 1500} for ts, m in messages]
        doc = {"events": events, "nextForwardToken": "f/1", "nextBackwardToken": "b/1"}
        (out / f"{name}.get-log-events.json").write_text(json.dumps(doc, indent=4) + "\n")
    if name == "pytorch_mlp_nan":  # `aws logs filter-log-events --log-group-name ... --log-stream-name-prefix job/`
        events = [
            {
                "logStreamName": stream,
                "timestamp": ts,
                "message": m,
                "ingestionTime": ts + 1500,
                "eventId": _event_id(ts, i),
            }
            for i, (ts, m) in enumerate(messages)
        ]
        doc = {"events": events, "searchedLogStreams": []}
        (out / f"{name}.filter-log-events.json").write_text(json.dumps(doc, indent=4) + "\n")


def _event_id(ts: int, i: int) -> str:
    return f"{ts:020d}{i:036d}"[:56]  # CloudWatch Logs' event ids are 56 decimal digits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path, help="folder for the logs (tests/data/training_logs)")
    parser.add_argument("--only", action="append", choices=sorted(RUNS), help="run only these (repeatable)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or RUNS:
        started = time.monotonic()
        with captured() as lines:
            RUNS[name]()
        stream = f"{name.replace('_', '-').replace('.', '-')}/algo-1-{lines[0][0] // 1000}"
        write(name, lines, args.out, stream=stream)
        print(f"{name}: {len(lines)} lines in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
