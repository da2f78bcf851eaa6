"""What scripts/compose_cluster.sh needs to know of a compose file, read from the output of
`docker-compose config` on stdin: its node services and the elastic range they were given.

Prints shell assignments (nodes_in_file=3 min_nodes=2 max_nodes=3 epochs=3 images='...')
or, when the file is one the script cannot run, one line saying what to change and exit 1.

Rules: the nodes are services node0..nodeN-1 (N >= 2), each running ringrun with the same
--nnodes MIN:MAX whose MAX is N (a node service more or less than --nnodes says is an edit
the script does not follow); a service named redis is the store.
"""
import re
import shlex
import sys

try:
    import yaml
except ImportError:
    print("reading the compose file needs Python's yaml module (apt-get install python3-yaml)")
    sys.exit(1)


def flag_value(command, flag):
    """The value of --flag in a command list (--flag V or --flag=V; dashes or underscores)."""
    names = {flag, flag.replace("_", "-"), flag.replace("-", "_")}
    for i, word in enumerate(command):
        name, eq, value = word.partition("=")
        if name in names:
            if eq:
                return value
            if i + 1 < len(command):
                return command[i + 1]
    return None


def fail(message):
    print(message)
    sys.exit(1)


def main():
    try:
        config = yaml.safe_load(sys.stdin) or {}
    except yaml.YAMLError as e:
        fail(f"the compose configuration does not parse as YAML: {str(e).splitlines()[0]}")
    if not isinstance(config, dict):
        fail("the compose configuration is not a mapping of services")
    services = config.get("services") or {}
    if "redis" not in services:
        fail("the compose file has no service 'redis' (the store the nodes rendezvous through)")
    node_names = sorted((name for name in services if re.fullmatch(r"node\d+", name)), key=lambda n: int(n[4:]))
    expected = [f"node{i}" for i in range(len(node_names))]
    if len(node_names) < 2 or node_names != expected:
        fail(f"the compose file's node services are {node_names or 'none'}: this script runs node0..nodeN-1 with N >= 2; "
             "name them so")
    ranges = set()
    for name in node_names:
        command = services[name].get("command") or []
        if isinstance(command, str):
            command = shlex.split(command)
        value = flag_value(command, "--nnodes")
        if value is None:
            fail(f"service {name} runs no ringrun --nnodes MIN:MAX: give every node the same elastic range")
        ranges.add(value)
    if len(ranges) != 1:
        fail(f"the node services give different --nnodes ({', '.join(sorted(ranges))}): give every node the same")
    text = ranges.pop()
    match = re.fullmatch(r"(\d+)(?::(\d+))?", text)
    if not match:
        fail(f"--nnodes {text} in the compose file: give N or MIN:MAX")
    low = int(match.group(1))
    high = int(match.group(2) or low)
    if high != len(node_names):
        fail(f"the compose file has {len(node_names)} node services (node0..node{len(node_names) - 1}) but their ringrun "
             f"says --nnodes {text}: this script supports a file whose node count is --nnodes' maximum; change one "
             "to match the other")
    node0 = services["node0"].get("command") or []
    if isinstance(node0, str):
        node0 = shlex.split(node0)
    epochs = flag_value(node0, "--epochs") or ""
    images = " ".join(sorted({s.get("image", "") for s in services.values()}))
    print(f"nodes_in_file={len(node_names)} min_nodes={low} max_nodes={high} epochs={shlex.quote(epochs)} "
          f"images={shlex.quote(images)}")


if __name__ == "__main__":
    main()
