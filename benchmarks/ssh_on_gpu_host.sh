#!/usr/bin/env bash
# A real sshd on a GPU host's loopback, from carried Debian packages, then `make bench` over SSH
# at 127.0.0.1 against the host's GPUs (runtime native). For a host that has no sshd and cannot
# install one (the device tool's machines: no package registry there).
#
#   benchmarks/ssh_on_gpu_host.sh DEBS_DIR OUT_DIR [PLAN] [NODES]
#
# NODES=2: two hosts of one group on 127.0.0.2 and 127.0.0.3, each given half of the GPUs
# (CUDA_VISIBLE_DEVICES) and an NCCL host id of its own, so that one torchrun job over c10d
# rendezvous spans two "machines" joined by the network path NCCL takes between hosts: the real
# multi-node path, beside the same GPUs split into emulated nodes by a plan's `nodes: 2`.
#
# DEBS_DIR holds openssh-server, openssh-sftp-server, openssh-client (ssh-keygen) and the
# libraries they link, as `apt-get download` gets them on Debian 12; only those libraries the
# host lacks are put on sshd's library path. Runs as root (sshd's privilege separation needs
# the user `sshd` and /run/sshd, made here when missing). Only 127.0.0.1 is listened on and
# connected to. The controller's Python packages must be importable (PYTHONPATH) beforehand.
set -u
debs=$(realpath "$1") out=$(realpath "$2") plan=${3:-quick} nodes=${4:-1}
prefix=/tmp/sshd-prefix state=/tmp/sshd port=2222
mkdir -p "$prefix" "$state/lib" "$out" && chmod 700 "$state"

echo "== unpack"
for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$prefix" || exit 1; done
sshd=$prefix/usr/sbin/sshd keygen=$prefix/usr/bin/ssh-keygen sftp=$prefix/usr/lib/openssh/sftp-server

# Libraries the host lacks, from the prefix; again until none is missing (a carried one may
# itself need another the host lacks).
for round in 1 2 3 4 5; do
  missing=$(for bin in "$sshd" "$keygen" "$sftp"; do LD_LIBRARY_PATH=$state/lib ldd "$bin"; done | awk '/not found/{print $1}' | sort -u)
  [ -z "$missing" ] && break
  echo "round $round, the host lacks: $missing"
  for lib in $missing; do
    found=$(find "$prefix" -name "$lib" | head -1)
    [ -n "$found" ] || { echo "not carried: $lib"; exit 1; }
    cp -L "$found" "$state/lib/"
  done
done
echo "libraries taken from the prefix: $(ls "$state/lib" | tr '\n' ' ')"
export SSHD_LIBS=$state/lib

echo "== keys"
rm -f "$state"/ssh_host_ed25519_key* "$state"/id_ed25519*
LD_LIBRARY_PATH=$SSHD_LIBS "$keygen" -q -t ed25519 -N '' -f "$state/ssh_host_ed25519_key" || exit 1
LD_LIBRARY_PATH=$SSHD_LIBS "$keygen" -q -t ed25519 -N '' -f "$state/id_ed25519" || exit 1
cp "$state/id_ed25519.pub" "$state/authorized_keys" && chmod 600 "$state/authorized_keys"

echo "== privilege separation"
id sshd >/dev/null 2>&1 || useradd -r -M -d /run/sshd -s /usr/sbin/nologin sshd \
  || echo 'sshd:x:199:65534::/run/sshd:/usr/sbin/nologin' >>/etc/passwd
mkdir -p /run/sshd && chmod 755 /run/sshd
id sshd

# A session gets the environment this shell has for what a GPU job needs (sshd starts sessions
# with a minimal one): the driver's library path, PATH, and NVLink multicast off.
cat >"$state/sshd_config" <<EOF
Port $port
$(if [ "$nodes" = 1 ]; then echo "ListenAddress 127.0.0.1"; else for n in $(seq 2 $((nodes + 1))); do echo "ListenAddress 127.0.0.$n"; done; fi)
HostKey $state/ssh_host_ed25519_key
PidFile $state/sshd.pid
AuthorizedKeysFile $state/authorized_keys
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
Subsystem sftp $sftp
SetEnv PATH=$PATH LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
LogLevel VERBOSE
EOF
cat "$state/sshd_config"

echo "== sshd"
LD_LIBRARY_PATH=$SSHD_LIBS "$sshd" -t -f "$state/sshd_config" || exit 1
LD_LIBRARY_PATH=$SSHD_LIBS "$sshd" -D -e -f "$state/sshd_config" -p $port 2>"$out/sshd.log" &
sshd_pid=$!
trap 'kill $sshd_pid 2>/dev/null' EXIT
first=127.0.0.$([ "$nodes" = 1 ] && echo 1 || echo 2)
for _ in $(seq 50); do (exec 3<>/dev/tcp/$first/$port) 2>/dev/null && break; sleep 0.1; done
echo "sshd pid $sshd_pid listening on port $port"

python=$(command -v python3)
echo "== a command over SSH (paramiko), python $python"
python3 - "$state/id_ed25519" "$port" "$python" "$first" <<'EOF' || exit 1
import sys, paramiko
key, port, python, address = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
client = paramiko.SSHClient()
client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
client.connect(address, port=port, username="root", key_filename=key, look_for_keys=False, allow_agent=False)
command = f"id -un; uname -sr; nvidia-smi -L; {python} -c 'import torch; print(torch.__version__, torch.cuda.device_count())'"
_, stdout, stderr = client.exec_command(command)
print(stdout.read().decode(), stderr.read().decode(), "exit", stdout.channel.recv_exit_status())
sftp = client.open_sftp(); print("sftp listdir /tmp:", len(sftp.listdir("/tmp")), "entries"); client.close()
EOF

# One host entry of the hosts file: NAME ADDRESS WORKDIR.
ssh_host() {
  cat <<EOF
  - name: $1
    runtime: native
    address: $2
    port: $port
    user: root
    identity_file: $state/id_ed25519
    accept_new_host_key: true
    known_hosts_file: $state/known_hosts
    python: $python
    workdir: $3
EOF
}
if [ "$nodes" = 1 ]; then
{
  echo "# This GPU host reached over SSH at its own loopback (benchmarks/ssh_on_gpu_host.sh)."
  echo "hosts:"
  ssh_host gpu-loopback-ssh 127.0.0.1 /tmp/ddpbench-ssh
  echo '    labels: ["sshd on loopback"]'
} >"$out/hosts-loopback-ssh.yaml"
else
gpus=$(nvidia-smi -L | wc -l) per=$((gpus / nodes))
{
  echo "# This GPU host as $nodes hosts of one group over SSH on loopback (benchmarks/ssh_on_gpu_host.sh)."
  echo "hosts:"
  for n in $(seq 1 "$nodes"); do
    visible=$(seq -s, $(((n - 1) * per)) $((n * per - 1)))
    ssh_host "node$n" "127.0.0.$((n + 1))" "/tmp/ddpbench-ssh-node$n"
    echo "    env: {CUDA_VISIBLE_DEVICES: \"$visible\", NCCL_HOSTID: \"loopback-node$n\"}"
    echo "    labels: [\"sshd on loopback\", \"GPUs $visible\"]"
  done
  echo "groups:"
  echo "  - name: loopback-nodes"
  echo "    hosts: [$(seq -s, -f 'node%g' 1 "$nodes" | sed 's/,/, /g')]"
  echo "    rendezvous_address: 127.0.0.2"
} >"$out/hosts-loopback-ssh.yaml"
fi
cat "$out/hosts-loopback-ssh.yaml"

echo "== make bench HOSTS=$out/hosts-loopback-ssh.yaml PLAN=$plan"
PIP_NO_INDEX=1 make bench HOSTS="$out/hosts-loopback-ssh.yaml" PLAN="$plan" OUT=/tmp/ddpbench-results 2>&1
status=$?
echo "make bench exit status $status"
run_dir=$(ls -d /tmp/ddpbench-results/*/ 2>/dev/null | tail -1)
[ -n "$run_dir" ] && cp "$run_dir/report.md" "$run_dir/bundle.json" "$out/"
exit "$status"
