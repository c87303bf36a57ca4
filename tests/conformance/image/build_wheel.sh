#!/usr/bin/env bash
# Build the motor wheel in /opt/MindIE-PyMotor into dist/. Upstream's docker/Dockerfile runs `bash build.sh`, which
# runs scripts/generate_proto.sh (grpc_tools.protoc per .proto directory, then rewrites the generated
# `import x_pb2` lines to absolute `from <package> import x_pb2`) and `pip wheel . --no-deps`. The shared source
# tree (../shared/upstream/pymotor) does not carry build.sh nor scripts/: when they are there they are used as is,
# otherwise these same two steps run here (the tree's own files are never changed outside the image).
set -euo pipefail
if [ -f build.sh ] && [ -f scripts/generate_proto.sh ]; then
  echo "build_wheel.sh: using upstream build.sh"
  exec bash build.sh
fi
echo "build_wheel.sh: upstream build.sh is not in this tree: generating the protobuf modules and the wheel"
find motor -name '*.proto' -printf '%h\n' | sort -u | while read -r dir; do
  package=${dir//\//.}
  (cd "$dir" && python3 -m grpc_tools.protoc --proto_path=. --python_out=. --grpc_python_out=. ./*.proto)
  sed -i -E "s/^import ([A-Za-z0-9_]+_pb2)( as .*)?$/from ${package} import \1\2/" "$dir"/*_pb2.py "$dir"/*_pb2_grpc.py
done
rm -rf build/ motor.egg-info/ dist/
python3 -m pip wheel . --no-deps -w dist -q
ls dist/motor-*.whl
