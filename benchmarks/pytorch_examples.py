"""PyTorch's own example models, written with ``srcgrad.nn`` in their class structure and
layer names, against PyTorch eager: one training step at the examples' sizes.

Each workload is a pair: the torch model as ``pytorch/examples`` writes it, and the same
class written with ``srcgrad.nn`` (``F`` is ``srcgrad.nn.functional``), loaded from the
torch model's ``state_dict``.  A step is the loss and the gradient of every parameter
(torch: ``zero_grad``, forward, ``backward``; srcgrad: ``value_and_grad(loss)(model, ...)``),
dropout off (``eval()``) so that the two compute the same thing; the gradients are
checked against torch's before anything is timed.

Run from the repository root (torch needed)::

    python -m benchmarks.pytorch_examples            # float32 and float64, every model
    python -m benchmarks.pytorch_examples --quick    # a few repeats, smaller batches
    python -m benchmarks.pytorch_examples --write    # ... and update docs/benchmarks.md
    python -m benchmarks.pytorch_examples --profile mnist_cnn   # top lines by time
    python -m benchmarks.pytorch_examples --models gcn,dcgan    # only these

The models (``pytorch/examples``, BSD licence; rewritten here, not copied):

- ``mnist_cnn``: ``mnist/main.py``'s ``Net`` (conv 1->32 3x3, conv 32->64 3x3, max pool 2,
  linear 9216->128->10, log-softmax, NLL), batch 64.
- ``vae``: ``vae/main.py``'s ``VAE`` (784->400->(20, 20), 20->400->784), the
  reparameterisation's noise given, BCE (sum) + KL divergence, batch 128.
- ``word_lm``: ``word_language_model``'s ``RNNModel`` with an LSTM (embedding 200, 2
  layers of 200, decoder to 33,278 words as Wikitext-2), sequence 35, batch 20.
- ``word_lm_gru``: the same with a GRU.
- ``word_lm_transformer``: ``word_language_model``'s ``TransformerModel`` (embedding 200,
  the sinusoidal ``PositionalEncoding`` a buffer, 2 ``TransformerEncoderLayer``s of 2 heads and
  200 wide, the causal mask ``log(tril(ones))`` cached on the model), sequence 35, batch 20.
- ``dcgan``: ``dcgan/main.py``'s ``Generator`` and ``Discriminator`` (nz 100, ngf = ndf = 64,
  64 x 64 RGB; ConvTranspose2d, BatchNorm2d in training mode, LeakyReLU, Tanh, BCE), one
  step's three losses summed (the fakes detached for the discriminator's), batch 64.
- ``time_sequence``: ``time_sequence_prediction``'s ``Sequence`` (two ``LSTMCell``s of 51
  unrolled over the 999 steps of 97 sine waves, then ``future`` steps fed their own output:
  none in the training step, 3 in the quick test), MSE.
- ``mnist_rnn``: ``mnist_rnn``'s ``Net`` (an LSTM of 64, ``batch_first``, over the 28 rows,
  BatchNorm1d, 64 -> 32 -> 10), batch 64.
- ``siamese``: ``siamese_network``'s ``SiameseNetwork`` on a ResNet-18 (torchvision's,
  written out: BasicBlocks, downsample shortcuts, AdaptiveAvgPool2d; BatchNorm2d in
  training mode) over pairs of 28 x 28 images, concatenated features -> 256 -> 1, sigmoid,
  BCE, batch 64 (the quick test: width 4, not 64).
- ``reinforce``, ``actor_critic``: ``reinforcement_learning``'s policies (4 -> 128 -> 2
  probabilities; and a value head), their ``finish_episode`` losses over a 200-step episode
  replayed step by step (``Categorical(probs).log_prob(action)`` as ``log(probs[action])``).
- ``gcn``: ``gcn``'s two ``GraphConv`` layers ``adj @ (x @ kernel) + bias`` on Cora's sizes
  (2708 nodes, 1433 features, 16 hidden, 7 classes, 140 labelled), the normalised adjacency
  dense, log-softmax + NLL.
"""
from __future__ import annotations

import math
import sys
import time

if not __package__:  # (run as a file, ``python benchmarks/pytorch_examples.py``: the repository's root)
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))

from benchmarks import _env  # noqa: E402

if __name__ == "__main__":
    _env.pin_threads(1)

import numpy as np  # noqa: E402

import srcgrad  # noqa: E402
from srcgrad import nn  # noqa: E402
from srcgrad.nn import functional as F  # noqa: E402


# ---- the models, written with srcgrad.nn -------------------------------------------------

class MnistNet(nn.Module):
    def __init__(self, dtype=np.float64):
        self.conv1 = nn.Conv2d(1, 32, 3, 1, dtype=dtype)
        self.conv2 = nn.Conv2d(32, 64, 3, 1, dtype=dtype)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128, dtype=dtype)
        self.fc2 = nn.Linear(128, 10, dtype=dtype)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = x.reshape(x.shape[0], -1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def mnist_loss(model, x, target):
    return F.nll_loss(model(x), target)


class VAE(nn.Module):
    def __init__(self, dtype=np.float64):
        self.fc1 = nn.Linear(784, 400, dtype=dtype)
        self.fc21 = nn.Linear(400, 20, dtype=dtype)
        self.fc22 = nn.Linear(400, 20, dtype=dtype)
        self.fc3 = nn.Linear(20, 400, dtype=dtype)
        self.fc4 = nn.Linear(400, 784, dtype=dtype)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return F.sigmoid(self.fc4(h3))

    def forward(self, x, eps):
        mu, logvar = self.encode(x.reshape(-1, 784))
        z = mu + eps * np.exp(0.5 * logvar)
        return self.decode(z), mu, logvar


def vae_loss(model, x, eps):
    recon, mu, logvar = model(x, eps)
    bce = F.binary_cross_entropy(recon, x.reshape(-1, 784), reduction="sum")
    kld = -0.5 * np.sum(1 + logvar - mu ** 2 - np.exp(logvar))
    return bce + kld


class RNNModel(nn.Module):
    """``word_language_model``'s ``RNNModel``: ``rnn_type`` ``"LSTM"`` or ``"GRU"``."""

    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2, dtype=np.float64, rnn_type="LSTM"):
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp, dtype=dtype)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout, dtype=dtype)
        self.decoder = nn.Linear(nhid, ntoken, dtype=dtype)
        self.ntoken = ntoken

    def forward(self, tokens, hidden):
        emb = self.drop(self.encoder(tokens))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).reshape(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden


def word_lm_loss(model, tokens, hidden, targets):
    output, _ = model(tokens, hidden)
    return F.nll_loss(output, targets)


# (the models below are written as the examples write them, in float64, and cast with
# ``model.to(dtype)`` as a PyTorch user casts theirs; each example's loss is a module-level
# criterion where the example has one)

class PositionalEncoding(nn.Module):
    """``word_language_model``'s sinusoidal positional encoding (Vaswani et al. 2017, §3.5),
    a buffer of (max_len, 1, d_model)."""

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        self.dropout = nn.Dropout(p=dropout)
        pe = np.zeros((max_len, d_model))
        position = np.arange(0, max_len, dtype=np.float64)[:, None]
        div_term = np.exp(np.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = np.sin(position * div_term)
        pe[:, 1::2] = np.cos(position * div_term)
        pe = np.swapaxes(pe[None], 0, 1)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:x.shape[0], :]
        return self.dropout(x)


class TransformerModel(nn.Module):
    """``word_language_model``'s ``TransformerModel``: embedding, positional encoding, a
    ``TransformerEncoder`` under the causal mask (cached on the model, as the example
    caches it), a decoder to the vocabulary, log-softmax."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        self.model_type = "Transformer"
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        encoder_layers = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)

    def _generate_square_subsequent_mask(self, sz):
        with np.errstate(divide="ignore"):  # (log 0 = -inf above the diagonal, as the example)
            return np.log(np.tril(np.ones((sz, sz))))

    def forward(self, src, has_mask=True):
        if has_mask:
            if self.src_mask is None or self.src_mask.shape[0] != len(src):
                mask = self._generate_square_subsequent_mask(len(src))
                self.src_mask = mask
        else:
            self.src_mask = None
        src = self.encoder(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, self.src_mask)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


criterion = nn.NLLLoss()


def transformer_lm_loss(model, data, targets):
    output = model(data)
    return criterion(output.reshape(-1, output.shape[-1]), targets)


class Generator(nn.Module):
    """``dcgan``'s generator: ``nz`` noise (N, nz, 1, 1) -> (N, nc, 64, 64) images."""

    def __init__(self, nz=100, ngf=64, nc=3):
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 8),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, input):
        output = self.main(input)
        return output


class Discriminator(nn.Module):
    """``dcgan``'s discriminator: (N, nc, 64, 64) images -> (N,) probabilities of being real."""

    def __init__(self, ndf=64, nc=3):
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 4),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input):
        output = self.main(input)
        return output.reshape(-1, 1).squeeze(1)


class DCGAN(nn.Module):
    """The two networks of one ``dcgan`` training step (``netG``, ``netD``)."""

    def __init__(self, nz=100, ngf=64, ndf=64, nc=3):
        self.netG = Generator(nz, ngf, nc)
        self.netD = Discriminator(ndf, nc)


bce = nn.BCELoss()
real_label, fake_label = 1.0, 0.0


def dcgan_loss(model, real, noise):
    """One step's two losses, as ``dcgan/main.py`` computes them (the discriminator's on real
    images and on detached fakes, the generator's through the discriminator), summed: the
    generator's gradient is errG's, the discriminator's errD's plus errG's (what torch
    accumulates before the example's ``netD.zero_grad()``)."""
    netD, netG = model.netD, model.netG
    batch_size = real.shape[0]
    label = np.full((batch_size,), real_label, dtype=real.dtype)
    output = netD(real)
    errD_real = bce(output, label)
    fake = netG(noise)
    label = np.full((batch_size,), fake_label, dtype=real.dtype)
    output = netD(srcgrad.stop_gradient(fake))
    errD_fake = bce(output, label)
    errD = errD_real + errD_fake
    label = np.full((batch_size,), real_label, dtype=real.dtype)
    output = netD(fake)
    errG = bce(output, label)
    return errD + errG


class Sequence(nn.Module):
    """``time_sequence_prediction``'s two ``LSTMCell``s (51 wide) and a linear read-out,
    unrolled over the input's steps, then ``future`` steps fed their own predictions."""

    def __init__(self, hidden=51):
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)
        self.hidden = hidden

    def forward(self, input, future=0):
        outputs = []
        h_t = np.zeros((input.shape[0], self.hidden), dtype=input.dtype)
        c_t = np.zeros((input.shape[0], self.hidden), dtype=input.dtype)
        h_t2 = np.zeros((input.shape[0], self.hidden), dtype=input.dtype)
        c_t2 = np.zeros((input.shape[0], self.hidden), dtype=input.dtype)

        for input_t in np.split(input, input.shape[1], axis=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = np.concatenate(outputs, axis=1)
        return outputs


mse = nn.MSELoss()


def time_sequence_loss(seq, input, target, future):
    out = seq(input, future=future)
    return mse(out, target)


class MnistRNN(nn.Module):
    """``mnist_rnn``'s ``Net``: an LSTM (batch_first) over the image's 28 rows, its last
    output batch-normalised, then 64 -> 32 -> 10, log-softmax."""

    def __init__(self):
        self.rnn = nn.LSTM(input_size=28, hidden_size=64, batch_first=True)
        self.batchnorm = nn.BatchNorm1d(64)
        self.dropout1 = nn.Dropout2d(0.25)
        self.dropout2 = nn.Dropout2d(0.5)
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, input):
        input = input.reshape(-1, 28, 28)
        output, hidden = self.rnn(input)
        output = output[:, -1, :]  # the last step's output
        output = self.batchnorm(output)
        output = self.dropout1(output)
        output = self.fc1(output)
        output = F.relu(output)
        output = self.dropout2(output)
        output = self.fc2(output)
        output = F.log_softmax(output, dim=1)
        return output


def mnist_rnn_loss(model, data, target):
    return F.nll_loss(model(data), target)


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """torchvision's ResNet ``BasicBlock`` (He et al. 2016): two 3x3 convolutions with batch
    normalisation, the input added back (through ``downsample`` where the shape changes)."""

    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        # (torchvision's ``out += identity``, refused: srcgrad cannot tell that ``bn2``'s
        # result shares memory with nothing else)
        out = out + identity
        out = self.relu(out)
        return out


class ResNet(nn.Module):
    """torchvision's ResNet of ``BasicBlock``s (``layers`` blocks per stage; ``width`` the
    first stage's channels, 64 in torchvision, smaller for a quick test)."""

    def __init__(self, block, layers, num_classes=1000, width=64):
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(block, width * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(block, width * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, num_classes)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.maxpool(x)
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)
        x = self.avgpool(x)
        x = x.reshape(x.shape[0], -1)
        x = self.fc(x)
        return x


def resnet18(width=64):
    return ResNet(BasicBlock, [2, 2, 2, 2], width=width)


class SiameseNetwork(nn.Module):
    """``siamese_network``'s ``SiameseNetwork``: a ResNet-18 trunk read through its
    children but the last (``fc``), its first convolution for one-channel images; the two
    images' features concatenated, then 2 x 512 -> 256 -> 1 and a sigmoid."""

    def __init__(self, width=64, hidden=256):
        self.resnet = resnet18(width=width)
        self.resnet.conv1 = nn.Conv2d(1, width, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)
        self.fc_in_features = self.resnet.fc.in_features
        self.resnet = nn.Sequential(*(list(self.resnet.children())[:-1]))
        self.fc = nn.Sequential(
            nn.Linear(self.fc_in_features * 2, hidden),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, 1),
        )
        self.sigmoid = nn.Sigmoid()

    def forward_once(self, x):
        output = self.resnet(x)
        output = output.reshape(output.shape[0], -1)
        return output

    def forward(self, input1, input2):
        output1 = self.forward_once(input1)
        output2 = self.forward_once(input2)
        output = np.concatenate((output1, output2), 1)
        output = self.fc(output)
        output = self.sigmoid(output)
        return output


def siamese_loss(model, images_1, images_2, targets):
    outputs = model(images_1, images_2).squeeze()
    return bce(outputs, targets)


class Policy(nn.Module):
    """``reinforcement_learning/reinforce.py``'s policy: CartPole's 4 observations -> 128 ->
    probabilities of its 2 actions."""

    def __init__(self):
        self.affine1 = nn.Linear(4, 128)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(128, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)


def reinforce_loss(policy, states, actions, returns):
    """``finish_episode``'s loss, the episode's steps replayed: each step's log-probability of
    the action taken (``Categorical(probs).log_prob(action)``) times the normalised return."""
    policy_loss = []
    for t in range(len(returns)):
        probs = policy(states[t][None])
        log_prob = np.log(probs[0, actions[t]])
        policy_loss.append(-log_prob * returns[t])
    return np.sum(np.stack(policy_loss))


class ActorCritic(nn.Module):
    """``reinforcement_learning/actor_critic.py``'s ``Policy``: a shared 4 -> 128 layer, an
    action head (probabilities) and a value head."""

    def __init__(self):
        self.affine1 = nn.Linear(4, 128)
        self.action_head = nn.Linear(128, 2)
        self.value_head = nn.Linear(128, 1)
        self.saved_actions = []
        self.rewards = []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        action_prob = F.softmax(self.action_head(x), dim=-1)
        state_values = self.value_head(x)
        return action_prob, state_values


def actor_critic_loss(model, states, actions, returns):
    """``finish_episode``'s loss, the episode replayed: the policy's ``-log_prob * advantage``
    (the value read as a number: ``value.item()``) plus the value's smooth L1 loss."""
    policy_losses = []
    value_losses = []
    for t in range(len(returns)):
        probs, value = model(states[t])
        log_prob = np.log(probs[actions[t]])
        R = returns[t]
        advantage = R - srcgrad.stop_gradient(value[0])
        policy_losses.append(-log_prob * advantage)
        value_losses.append(F.smooth_l1_loss(value, np.reshape(R, (1,))))
    return np.sum(np.stack(policy_losses)) + np.sum(np.stack(value_losses))


class GraphConv(nn.Module):
    """``gcn``'s graph convolution (Kipf and Welling 2017): ``adj @ (x @ kernel) + bias``,
    the adjacency normalised and dense here (the example's is sparse)."""

    def __init__(self, input_dim, output_dim, use_bias=False):
        self.kernel = nn.init.xavier_normal((input_dim, output_dim))
        self.bias = None
        if use_bias:
            self.bias = np.zeros(output_dim)

    def forward(self, input_tensor, adj_mat):
        support = input_tensor @ self.kernel
        output = adj_mat @ support
        if self.bias is not None:
            output = output + self.bias
        return output


class GCN(nn.Module):
    """``gcn``'s two-layer ``GCN``: graph convolution, ReLU, dropout, graph convolution,
    log-softmax over the classes."""

    def __init__(self, input_dim, hidden_dim, output_dim, use_bias=True, dropout_p=0.1):
        self.gc1 = GraphConv(input_dim, hidden_dim, use_bias=use_bias)
        self.gc2 = GraphConv(hidden_dim, output_dim, use_bias=use_bias)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input_tensor, adj_mat):
        x = self.gc1(input_tensor, adj_mat)
        x = F.relu(x)
        x = self.dropout(x)
        x = self.gc2(x, adj_mat)
        return F.log_softmax(x, dim=1)


def gcn_loss(model, features, adj_mat, labels, idx_train):
    output = model(features, adj_mat)
    return criterion(output[idx_train], labels[idx_train])


# ---- the same models in torch -------------------------------------------------------------

def _torch_models():
    import torch
    import torch.nn as tnn
    import torch.nn.functional as TF

    class TorchMnistNet(tnn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = tnn.Conv2d(1, 32, 3, 1)
            self.conv2 = tnn.Conv2d(32, 64, 3, 1)
            self.dropout1 = tnn.Dropout(0.25)
            self.dropout2 = tnn.Dropout(0.5)
            self.fc1 = tnn.Linear(9216, 128)
            self.fc2 = tnn.Linear(128, 10)

        def forward(self, x):
            x = TF.relu(self.conv1(x))
            x = TF.relu(self.conv2(x))
            x = TF.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = TF.relu(self.fc1(x))
            x = self.dropout2(x)
            return TF.log_softmax(self.fc2(x), dim=1)

    class TorchVAE(tnn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = tnn.Linear(784, 400)
            self.fc21 = tnn.Linear(400, 20)
            self.fc22 = tnn.Linear(400, 20)
            self.fc3 = tnn.Linear(20, 400)
            self.fc4 = tnn.Linear(400, 784)

        def forward(self, x, eps):
            h1 = TF.relu(self.fc1(x.view(-1, 784)))
            mu, logvar = self.fc21(h1), self.fc22(h1)
            z = mu + eps * torch.exp(0.5 * logvar)
            return torch.sigmoid(self.fc4(TF.relu(self.fc3(z)))), mu, logvar

    class TorchRNNModel(tnn.Module):
        def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2, rnn_type="LSTM"):
            super().__init__()
            self.drop = tnn.Dropout(dropout)
            self.encoder = tnn.Embedding(ntoken, ninp)
            self.rnn = getattr(tnn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = tnn.Linear(nhid, ntoken)
            self.ntoken = ntoken

        def forward(self, tokens, hidden):
            emb = self.drop(self.encoder(tokens))
            output, hidden = self.rnn(emb, hidden)
            decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
            return TF.log_softmax(decoded, dim=1), hidden

    def mnist(model, x, target):
        return TF.nll_loss(model(x), target)

    def vae(model, x, eps):
        recon, mu, logvar = model(x, eps)
        bce = TF.binary_cross_entropy(recon, x.view(-1, 784), reduction="sum")
        return bce - 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())

    def word_lm(model, tokens, hidden, targets):
        output, _ = model(tokens, hidden)
        return TF.nll_loss(output, targets)

    return {"mnist_cnn": (TorchMnistNet, mnist), "vae": (TorchVAE, vae), "word_lm": (TorchRNNModel, word_lm)}


def _torch_examples():
    """The examples added after the first three, in torch: ``{name: (model class, loss)}``."""
    import torch
    import torch.nn as tnn
    import torch.nn.functional as TF
    from torch.distributions import Categorical

    class PositionalEncoding(tnn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=5000):
            super().__init__()
            self.dropout = tnn.Dropout(p=dropout)
            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            pe = pe.unsqueeze(0).transpose(0, 1)
            self.register_buffer("pe", pe)

        def forward(self, x):
            return self.dropout(x + self.pe[:x.size(0), :])

    class TransformerModel(tnn.Module):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
            super().__init__()
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)
            self.transformer_encoder = tnn.TransformerEncoder(
                tnn.TransformerEncoderLayer(ninp, nhead, nhid, dropout), nlayers, enable_nested_tensor=False)
            self.encoder = tnn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = tnn.Linear(ninp, ntoken)

        def forward(self, src):
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                self.src_mask = torch.log(torch.tril(torch.ones(len(src), len(src))))
            src = self.pos_encoder(self.encoder(src) * math.sqrt(self.ninp))
            output = self.decoder(self.transformer_encoder(src, self.src_mask))
            return TF.log_softmax(output, dim=-1)

    def transformer_lm(model, data, targets):
        output = model(data)
        return TF.nll_loss(output.view(-1, output.size(-1)), targets)

    class Generator(tnn.Module):
        def __init__(self, nz=100, ngf=64, nc=3):
            super().__init__()
            self.main = tnn.Sequential(
                tnn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), tnn.BatchNorm2d(ngf * 8),
                tnn.ReLU(True),
                tnn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), tnn.BatchNorm2d(ngf * 4),
                tnn.ReLU(True),
                tnn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), tnn.BatchNorm2d(ngf * 2),
                tnn.ReLU(True),
                tnn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), tnn.BatchNorm2d(ngf), tnn.ReLU(True),
                tnn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), tnn.Tanh())

        def forward(self, input):
            return self.main(input)

    class Discriminator(tnn.Module):
        def __init__(self, ndf=64, nc=3):
            super().__init__()
            self.main = tnn.Sequential(
                tnn.Conv2d(nc, ndf, 4, 2, 1, bias=False), tnn.LeakyReLU(0.2, inplace=True),
                tnn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), tnn.BatchNorm2d(ndf * 2),
                tnn.LeakyReLU(0.2, inplace=True),
                tnn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), tnn.BatchNorm2d(ndf * 4),
                tnn.LeakyReLU(0.2, inplace=True),
                tnn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False), tnn.BatchNorm2d(ndf * 8),
                tnn.LeakyReLU(0.2, inplace=True),
                tnn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False), tnn.Sigmoid())

        def forward(self, input):
            return self.main(input).view(-1, 1).squeeze(1)

    class DCGAN(tnn.Module):
        def __init__(self, nz=100, ngf=64, ndf=64, nc=3):
            super().__init__()
            self.netG = Generator(nz, ngf, nc)
            self.netD = Discriminator(ndf, nc)

    def dcgan(model, real, noise):
        criterion = tnn.BCELoss()
        label = torch.full((real.size(0),), 1.0, dtype=real.dtype)
        errD_real = criterion(model.netD(real), label)
        fake = model.netG(noise)
        # (new labels, not the example's ``label.fill_``: its backward runs between the fills)
        errD_fake = criterion(model.netD(fake.detach()), torch.full_like(label, 0.0))
        errG = criterion(model.netD(fake), torch.full_like(label, 1.0))
        return errD_real + errD_fake + errG

    class Sequence(tnn.Module):
        def __init__(self, hidden=51):
            super().__init__()
            self.lstm1 = tnn.LSTMCell(1, hidden)
            self.lstm2 = tnn.LSTMCell(hidden, hidden)
            self.linear = tnn.Linear(hidden, 1)
            self.hidden = hidden

        def forward(self, input, future=0):
            outputs = []
            h_t = torch.zeros(input.size(0), self.hidden, dtype=input.dtype)
            c_t = torch.zeros(input.size(0), self.hidden, dtype=input.dtype)
            h_t2 = torch.zeros(input.size(0), self.hidden, dtype=input.dtype)
            c_t2 = torch.zeros(input.size(0), self.hidden, dtype=input.dtype)
            for input_t in input.split(1, dim=1):
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            for _ in range(future):
                h_t, c_t = self.lstm1(output, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            return torch.cat(outputs, dim=1)

    def time_sequence(seq, input, target, future):
        return TF.mse_loss(seq(input, future=future), target)

    class MnistRNN(tnn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = tnn.LSTM(input_size=28, hidden_size=64, batch_first=True)
            self.batchnorm = tnn.BatchNorm1d(64)
            self.dropout1 = tnn.Dropout(0.25)  # (the example's Dropout2d: off in eval, as here)
            self.dropout2 = tnn.Dropout(0.5)
            self.fc1 = tnn.Linear(64, 32)
            self.fc2 = tnn.Linear(32, 10)

        def forward(self, input):
            output, hidden = self.rnn(input.reshape(-1, 28, 28))
            output = self.dropout1(self.batchnorm(output[:, -1, :]))
            output = self.dropout2(TF.relu(self.fc1(output)))
            return TF.log_softmax(self.fc2(output), dim=1)

    def mnist_rnn(model, data, target):
        return TF.nll_loss(model(data), target)

    class BasicBlock(tnn.Module):
        expansion = 1

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = tnn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = tnn.BatchNorm2d(planes)
            self.relu = tnn.ReLU(inplace=True)
            self.conv2 = tnn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = tnn.BatchNorm2d(planes)
            self.downsample = downsample

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            return self.relu(out)

    class ResNet(tnn.Module):  # (torchvision's resnet18 at ``width``)
        def __init__(self, layers, num_classes=1000, width=64):
            super().__init__()
            self.inplanes = width
            self.conv1 = tnn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = tnn.BatchNorm2d(width)
            self.relu = tnn.ReLU(inplace=True)
            self.maxpool = tnn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = self._make_layer(width, layers[0])
            self.layer2 = self._make_layer(width * 2, layers[1], stride=2)
            self.layer3 = self._make_layer(width * 4, layers[2], stride=2)
            self.layer4 = self._make_layer(width * 8, layers[3], stride=2)
            self.avgpool = tnn.AdaptiveAvgPool2d((1, 1))
            self.fc = tnn.Linear(width * 8, num_classes)

        def _make_layer(self, planes, blocks, stride=1):
            downsample = None
            if stride != 1 or self.inplanes != planes:
                downsample = tnn.Sequential(tnn.Conv2d(self.inplanes, planes, 1, stride, bias=False),
                                            tnn.BatchNorm2d(planes))
            layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes
            layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
            return tnn.Sequential(*layers)

    class SiameseNetwork(tnn.Module):
        def __init__(self, width=64, hidden=256):
            super().__init__()
            self.resnet = ResNet([2, 2, 2, 2], width=width)
            self.resnet.conv1 = tnn.Conv2d(1, width, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3),
                                           bias=False)
            self.fc_in_features = self.resnet.fc.in_features
            self.resnet = tnn.Sequential(*(list(self.resnet.children())[:-1]))
            self.fc = tnn.Sequential(tnn.Linear(self.fc_in_features * 2, hidden), tnn.ReLU(inplace=True),
                                     tnn.Linear(hidden, 1))
            self.sigmoid = tnn.Sigmoid()

        def forward_once(self, x):
            output = self.resnet(x)
            return output.view(output.size()[0], -1)

        def forward(self, input1, input2):
            output = torch.cat((self.forward_once(input1), self.forward_once(input2)), 1)
            return self.sigmoid(self.fc(output))

    def siamese(model, images_1, images_2, targets):
        return TF.binary_cross_entropy(model(images_1, images_2).squeeze(), targets)

    class Policy(tnn.Module):
        def __init__(self):
            super().__init__()
            self.affine1 = tnn.Linear(4, 128)
            self.dropout = tnn.Dropout(p=0.6)
            self.affine2 = tnn.Linear(128, 2)

        def forward(self, x):
            return TF.softmax(self.affine2(TF.relu(self.dropout(self.affine1(x)))), dim=1)

    def reinforce(policy, states, actions, returns):
        policy_loss = []
        for state, action, R in zip(states, actions, returns):
            m = Categorical(policy(state.unsqueeze(0)))
            policy_loss.append(-m.log_prob(action) * R)
        return torch.cat(policy_loss).sum()

    class ActorCritic(tnn.Module):
        def __init__(self):
            super().__init__()
            self.affine1 = tnn.Linear(4, 128)
            self.action_head = tnn.Linear(128, 2)
            self.value_head = tnn.Linear(128, 1)

        def forward(self, x):
            x = TF.relu(self.affine1(x))
            return TF.softmax(self.action_head(x), dim=-1), self.value_head(x)

    def actor_critic(model, states, actions, returns):
        policy_losses, value_losses = [], []
        for state, action, R in zip(states, actions, returns):
            probs, value = model(state)
            log_prob = Categorical(probs).log_prob(action)
            advantage = R - value.item()
            policy_losses.append(-log_prob * advantage)
            value_losses.append(TF.smooth_l1_loss(value, R.reshape(1)))
        return torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()

    class GraphConv(tnn.Module):
        def __init__(self, input_dim, output_dim, use_bias=False):
            super().__init__()
            self.kernel = tnn.Parameter(torch.empty(input_dim, output_dim))
            tnn.init.xavier_normal_(self.kernel)
            self.bias = tnn.Parameter(torch.zeros(output_dim)) if use_bias else None

        def forward(self, input_tensor, adj_mat):
            output = torch.mm(adj_mat, torch.mm(input_tensor, self.kernel))
            return output + self.bias if self.bias is not None else output

    class GCN(tnn.Module):
        def __init__(self, input_dim, hidden_dim, output_dim, use_bias=True, dropout_p=0.1):
            super().__init__()
            self.gc1 = GraphConv(input_dim, hidden_dim, use_bias=use_bias)
            self.gc2 = GraphConv(hidden_dim, output_dim, use_bias=use_bias)
            self.dropout = tnn.Dropout(dropout_p)

        def forward(self, input_tensor, adj_mat):
            x = self.dropout(TF.relu(self.gc1(input_tensor, adj_mat)))
            return TF.log_softmax(self.gc2(x, adj_mat), dim=1)

    def gcn(model, features, adj_mat, labels, idx_train):
        return TF.nll_loss(model(features, adj_mat)[idx_train], labels[idx_train])

    return {"word_lm_gru": _torch_models()["word_lm"],
            "word_lm_transformer": (TransformerModel, transformer_lm),
            "dcgan": (DCGAN, dcgan), "time_sequence": (Sequence, time_sequence),
            "mnist_rnn": (MnistRNN, mnist_rnn),
            "siamese": (SiameseNetwork, siamese), "reinforce": (Policy, reinforce),
            "actor_critic": (ActorCritic, actor_critic), "gcn": (GCN, gcn)}


# ---- workloads ------------------------------------------------------------------------------

WORD_LM = dict(ntoken=33278, ninp=200, nhid=200, nlayers=2)
TRAINING = ("dcgan", "siamese")  # (the others in eval(): dropout off, so that both compute the same)


def _example(name, dtype, quick, rng):
    """A later example's ``(srcgrad model, srcgrad loss, torch model's arguments, loss arguments)``:
    the example's sizes, or small ones where ``quick``."""
    if name == "word_lm_gru":
        sizes = dict(WORD_LM, ntoken=1000) if quick else WORD_LM
        seq, batch = (5, 4) if quick else (35, 20)
        kwargs = dict(sizes, rnn_type="GRU")
        hidden = np.zeros((sizes["nlayers"], batch, sizes["nhid"]), dtype)
        args = (rng.integers(0, sizes["ntoken"], (seq, batch)), hidden,
                rng.integers(0, sizes["ntoken"], seq * batch))
        return RNNModel(**kwargs, dtype=dtype), word_lm_loss, kwargs, args
    if name == "word_lm_transformer":  # (main.py's defaults: emsize 200, nhid 200, 2 layers, 2 heads)
        kwargs = dict(ntoken=33278, ninp=200, nhead=2, nhid=200, nlayers=2, dropout=0.2)
        if quick:
            kwargs.update(ntoken=1000, ninp=16, nhid=32)
        seq, batch = (5, 4) if quick else (35, 20)
        ntoken = kwargs["ntoken"]
        args = (rng.integers(0, ntoken, (seq, batch)), rng.integers(0, ntoken, seq * batch))
        return TransformerModel(**kwargs), transformer_lm_loss, kwargs, args
    if name == "dcgan":  # (64 x 64 images, whatever the widths)
        kwargs = dict(nz=8, ngf=4, ndf=4, nc=3) if quick else dict(nz=100, ngf=64, ndf=64, nc=3)
        batch = 3 if quick else 64
        real = rng.uniform(-1, 1, (batch, kwargs["nc"], 64, 64)).astype(dtype)
        noise = rng.standard_normal((batch, kwargs["nz"], 1, 1)).astype(dtype)
        return DCGAN(**kwargs), dcgan_loss, kwargs, (real, noise)
    if name == "time_sequence":  # (generate_sine_wave.py's waves; the training step has no future)
        batch, length, future = (3, 8, 3) if quick else (97, 999, 0)
        x = np.arange(1000) + rng.integers(-80, 80, (batch, 1))
        data = np.sin(x / 20.0).astype(dtype)
        return Sequence(), time_sequence_loss, {}, (data[:, :length], data[:, 1:length + 1 + future], future)
    if name == "mnist_rnn":
        batch = 8 if quick else 64
        args = (rng.random((batch, 1, 28, 28)).astype(dtype), rng.integers(0, 10, batch))
        return MnistRNN(), mnist_rnn_loss, {}, args
    if name == "siamese":  # (MNIST pairs, 28 x 28)
        kwargs = dict(width=4, hidden=16) if quick else dict(width=64, hidden=256)
        batch = 4 if quick else 64
        images = rng.random((2, batch, 1, 28, 28)).astype(dtype)
        args = (images[0], images[1], rng.integers(0, 2, batch).astype(dtype))
        return SiameseNetwork(**kwargs), siamese_loss, kwargs, args
    if name in ("reinforce", "actor_critic"):  # (a CartPole episode's states, actions and returns)
        steps = 6 if quick else 200
        rewards, R, returns = np.ones(steps), 0.0, []
        for r in rewards[::-1]:
            R = r + 0.99 * R
            returns.insert(0, R)
        returns = np.array(returns)
        if name == "reinforce":  # (normalised, as reinforce.py's)
            returns = (returns - returns.mean()) / (returns.std(ddof=1) + np.finfo(np.float32).eps)
        states = (0.5 * rng.standard_normal((steps, 4))).astype(dtype)
        args = (states, rng.integers(0, 2, steps), returns.astype(dtype))
        if name == "reinforce":
            return Policy(), reinforce_loss, {}, args
        return ActorCritic(), actor_critic_loss, {}, args
    if name == "gcn":  # (Cora's sizes: 2708 nodes, 1433 features, 7 classes; 140 labelled)
        nodes, features, classes, labelled = (30, 12, 4, 10) if quick else (2708, 1433, 7, 140)
        kwargs = dict(input_dim=features, hidden_dim=8 if quick else 16, output_dim=classes, dropout_p=0.5)
        edges = rng.random((nodes, nodes)) < 4.0 / nodes
        adj = np.maximum(edges, edges.T) + np.eye(nodes)  # (symmetric, with self-loops)
        d = 1 / np.sqrt(adj.sum(axis=1))
        adj = (adj * d[:, None] * d[None, :]).astype(dtype)  # D^-1/2 (A + I) D^-1/2
        x = (rng.random((nodes, features)) < 0.05).astype(dtype)
        args = (x, adj, rng.integers(0, classes, nodes), rng.permutation(nodes)[:labelled])
        return GCN(**kwargs), gcn_loss, kwargs, args
    raise KeyError(name)


def workload(name, dtype, quick=False, seed=0):
    """``(srcgrad model, srcgrad loss, torch model, torch loss, srcgrad args, torch args)``,
    the srcgrad model loaded from the torch model's ``state_dict``, both in ``eval()`` (in
    ``train()`` for the models of ``TRAINING``, which have no dropout)."""
    import torch

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    tdtype = torch.float64 if dtype == np.float64 else torch.float32
    TorchModel, torch_loss = {**_torch_models(), **_torch_examples()}[name]
    if name == "mnist_cnn":
        batch = 8 if quick else 64
        ours, loss = MnistNet(dtype), mnist_loss
        theirs = TorchModel()
        x = rng.random((batch, 1, 28, 28)).astype(dtype)
        target = rng.integers(0, 10, batch)
        args = (x, target)
    elif name == "vae":
        batch = 16 if quick else 128
        ours, loss = VAE(dtype), vae_loss
        theirs = TorchModel()
        args = (rng.random((batch, 1, 28, 28)).astype(dtype), rng.standard_normal((batch, 20)).astype(dtype))
    elif name == "word_lm":
        sizes = dict(WORD_LM, ntoken=1000) if quick else WORD_LM
        seq, batch = (5, 4) if quick else (35, 20)
        ours, loss = RNNModel(**sizes, dtype=dtype), word_lm_loss
        theirs = TorchModel(**sizes)
        tokens = rng.integers(0, sizes["ntoken"], (seq, batch))
        hidden = (np.zeros((sizes["nlayers"], batch, sizes["nhid"]), dtype),) * 2
        args = (tokens, hidden, rng.integers(0, sizes["ntoken"], seq * batch))
    else:
        ours, loss, kwargs, args = _example(name, dtype, quick, rng)
        ours.to(dtype)
        theirs = TorchModel(**kwargs)
    theirs = theirs.to(tdtype).train(name in TRAINING)
    ours.load_state_dict(theirs.state_dict())
    ours.train(name in TRAINING)
    return ours, loss, theirs, torch_loss, args, _to_torch(args, tdtype)


def _to_torch(value, tdtype):
    import torch

    if isinstance(value, tuple):
        return tuple(_to_torch(v, tdtype) for v in value)
    if isinstance(value, int):
        return value
    if value.dtype.kind == "f":
        return torch.tensor(value, dtype=tdtype)
    return torch.tensor(value)


def step_pair(name, dtype, quick=False):
    """Two functions, one training step each (srcgrad's, torch's), returning
    ``(loss, {parameter name: gradient})``."""
    ours, loss, theirs, torch_loss, args, targs = workload(name, dtype, quick)
    value_and_grad = srcgrad.value_and_grad(loss)

    def srcgrad_step():
        value, grads = value_and_grad(ours, *args)
        return value, grads

    def torch_step():
        theirs.zero_grad()
        value = torch_loss(theirs, *targs)
        value.backward()
        return value

    return srcgrad_step, torch_step, ours, theirs


def check(name, dtype=np.float64, quick=True, rtol=1e-7, pair=None):
    """The largest relative difference between srcgrad's gradients and torch's (names as
    torch's ``named_parameters``); raises AssertionError above ``rtol``.  ``pair``: what
    :func:`step_pair` gave, to check those steps."""
    srcgrad_step, torch_step, ours, theirs = pair or step_pair(name, dtype, quick)
    value, grads = srcgrad_step()
    torch_value = torch_step()
    ours_by_name = dict(grads.named_parameters())
    worst = abs(float(value) - torch_value.item()) / max(abs(torch_value.item()), 1e-30)
    for key, p in theirs.named_parameters():
        g, t = np.asarray(ours_by_name[key], np.float64), p.grad.detach().double().numpy()
        scale = max(np.max(np.abs(t)), 1e-30)
        worst = max(worst, float(np.max(np.abs(g - t))) / scale)
    assert worst <= rtol, f"{name}: srcgrad's gradients differ from torch's by {worst:.2e} (relative)"
    if pair is None:  # (one step each: the buffers a training step updates, BatchNorm's, agree too)
        ours_buffers = dict(ours.named_buffers())
        for key, b in theirs.named_buffers():
            want = b.detach().double().numpy()
            got = np.asarray(ours_buffers[key], np.float64)
            scale = max(np.max(np.abs(want)), 1e-30)
            difference = float(np.max(np.abs(got - want))) / scale
            assert difference <= rtol, f"{name}: buffer {key} differs from torch's by {difference:.2e}"
    return worst


def _median_ms(fn, repeats):
    fn()  # (compiled, warm)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def run(names, quick=False):
    import torch

    torch.set_num_threads(1)
    rows = []
    for name in names:
        for dtype in (np.float32, np.float64):
            pair = step_pair(name, dtype, quick)
            srcgrad_step, torch_step, _, _ = pair
            start = time.perf_counter()
            srcgrad_step()  # (compiles: the first dtype's; the second's is specialised again)
            compile_s = time.perf_counter() - start
            worst = check(name, dtype, quick, rtol=1e-3 if dtype == np.float32 else 1e-7, pair=pair)
            repeats = 3 if quick else 20
            # (interleaved, so that a slow spell of the machine falls on both)
            ours, theirs = [], []
            for _ in range(2):
                theirs.append(_median_ms(torch_step, repeats))
                ours.append(_median_ms(srcgrad_step, repeats))
            rows.append((name, np.dtype(dtype).name, min(ours), min(theirs), min(ours) / min(theirs),
                         compile_s, worst))
            print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)  # (progress)
    return rows


def table(rows) -> str:
    lines = ["| model | dtype | srcgrad, ms | torch eager, ms | srcgrad / torch | first call (compile), s "
             "| grads vs torch (max rel.) |", "|---|---|---|---|---|---|---|"]
    for name, dtype, ours, theirs, ratio, compile_s, worst in rows:
        lines.append(f"| {name} | {dtype} | {ours:.2f} | {theirs:.2f} | **{ratio:.2f}x** | {compile_s:.2f} "
                     f"| {worst:.1e} |")
    return "\n".join(lines)


def profile(name, dtype=np.float64, top=5, repeats=5):
    """The ``top`` lines of srcgrad's generated step by time, printed: each line of generated
    code timed from its start to the next line's (a trace function, so the step runs slower,
    but the lines' shares hold), with the user's line it came from."""
    import linecache

    srcgrad_step, _, _, _ = step_pair(name, dtype)
    srcgrad_step()
    spent: dict = {}
    last = [None, 0.0]

    def tracer(frame, event, arg):
        if not frame.f_code.co_filename.startswith("<srcgrad"):
            return None
        if event in ("line", "return"):
            now = time.perf_counter()
            if last[0] is not None:
                spent[last[0]] = spent.get(last[0], 0.0) + now - last[1]
            last[0], last[1] = ((frame.f_code.co_filename, frame.f_lineno) if event == "line" else None), now
        return tracer
    sys.settrace(tracer)
    try:
        for _ in range(repeats):
            srcgrad_step()
    finally:
        sys.settrace(None)
    total = sum(spent.values())
    print(f"{name} ({np.dtype(dtype).name}): {1e3 * total / repeats:.1f} ms per step in generated lines")
    for (filename, line), seconds in sorted(spent.items(), key=lambda kv: -kv[1])[:top]:
        text = linecache.getline(filename, line).strip()
        print(f"  {100 * seconds / total:5.1f}%  {text[:110]}")


NAMES = ("mnist_cnn", "vae", "word_lm", "word_lm_gru", "word_lm_transformer", "dcgan", "time_sequence",
         "mnist_rnn", "siamese", "reinforce", "actor_critic", "gcn")

if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--help" in argv or "-h" in argv:
        print(__doc__)
        sys.exit(0)
    if "--models" in argv:  # (a comma-separated selection of NAMES)
        NAMES = tuple(argv[argv.index("--models") + 1].split(","))
    if "--profile" in argv:
        profile(argv[argv.index("--profile") + 1], top=12)
        sys.exit(0)
    quick = "--quick" in argv
    text = table(run(NAMES, quick))
    print(_env.machine_line(1))
    print(text)
    if "--write" in argv:
        _env.write_section("pytorch_examples", _env.machine_line(1) + "\n\n" + text + "\n")
