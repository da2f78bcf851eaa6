"""The Python definitions of ringtorch's models (models/registry.h): the same parameter and
buffer names and the same computation, so a ringtrain checkpoint's "model" entry loads into
them with load_state_dict(strict=True) and gives the same outputs.

    import sys; sys.path.insert(0, "<ringtorch>/models/python")
    from ringtorch_models import build
    model = build("resnet20", channels=3, height=32, width=32)
    model.load_state_dict(torch.load("checkpoint-0000000938.pt")["model"], strict=True)
"""
import torch.nn as nn
import torch.nn.functional as F


class SimpleModel(nn.Module):  # "mlp", the seeds' model
    def __init__(self, channels=1, height=28, width=28, classes=10):
        super().__init__()
        self.fc = nn.Linear(channels * height * width, classes)

    def forward(self, x):
        return self.fc(x.flatten(1))


class MLP3(nn.Module):  # "mlp3"
    def __init__(self, channels=1, height=28, width=28, classes=10):
        super().__init__()
        self.fc1 = nn.Linear(channels * height * width, 1024)
        self.fc2 = nn.Linear(1024, 1024)
        self.fc3 = nn.Linear(1024, classes)

    def forward(self, x):
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc3(F.relu(self.fc2(x)))


class LeNet(nn.Module):  # "lenet"
    def __init__(self, channels=1, height=28, width=28, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * ((height // 2 - 4) // 2) * ((width // 2 - 4) // 2), 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc3(F.relu(self.fc2(x)))


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or in_planes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet20(nn.Module):  # "resnet20", the CIFAR ResNet-20 (He et al. 2016, section 4.2)
    def __init__(self, channels=3, height=32, width=32, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = nn.Sequential(BasicBlock(16, 16), BasicBlock(16, 16), BasicBlock(16, 16))
        self.layer2 = nn.Sequential(BasicBlock(16, 32, 2), BasicBlock(32, 32), BasicBlock(32, 32))
        self.layer3 = nn.Sequential(BasicBlock(32, 64, 2), BasicBlock(64, 64), BasicBlock(64, 64))
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))


MODELS = {"mlp": SimpleModel, "mlp3": MLP3, "lenet": LeNet, "resnet20": ResNet20}


def build(name, channels=1, height=28, width=28, classes=10):
    return MODELS[name](channels, height, width, classes)
