# On the GPU machine (H100, 2026-12-07 17:11 UTC), binaries of 5342a9e (bench/tests-gpu bundle), carried with .gl, right
# after the GPU suite passed at the same commit (bench/results/2026-12-07-tests-5342a9e-nvidia-h100):
mkdir -p /tmp/g && tar xJf .gpu/build.tar.xz -C /tmp/g && cp .gpu/lib.tar.xz /tmp/g/ && bench/gpu-apps /tmp/g /tmp/apps
python3 bench/make_shapes_folder.py /tmp/shapes && python3 bench/make_sorted_ids.py /tmp/sorted
OPTIMIZER_FLAGS="--optimizer adamw --lr 0.001 --weight-decay 0.05 --schedule cosine --warmup-epochs 1" \
  bench/train-gpu /tmp/apps /tmp/vit /tmp /tmp 5 bench/nets/vit-tiny-32.json:/tmp/shapes
OPTIMIZER_FLAGS="--optimizer adamw --lr 0.0005 --weight-decay 0.01 --schedule cosine --warmup-epochs 0.5" \
  bench/train-gpu /tmp/apps /tmp/bert /tmp /tmp 4 bench/nets/bert-small-sorted.json:/tmp/sorted
