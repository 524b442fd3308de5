# The compose stack for real (tests/compose/compose_test.sh): starts dockerd when none answers,
# makes the Debian base image from Debian's mirror when it cannot be pulled, builds every image
# (which compiles the project inside Docker), brings compose/docker-compose.yml up on loopback,
# runs a 4-rank job across both workers through ringctl, reads its throughput from Prometheus,
# and tears everything down. Needs root (dockerd, debootstrap) and Debian's mirror.
# Measured on the 2-core build machine: about 7 minutes from nothing (no dockerd, no base image,
# no build cache), about 40 s with the images cached. See docs/containers.md.
add_test(NAME compose_stack_test
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/compose_test.sh ${PROJECT_BINARY_DIR})
# Serial: the image build takes every core, and one dockerd serves the whole machine.
set_tests_properties(compose_stack_test PROPERTIES LABELS compose RUN_SERIAL TRUE TIMEOUT 1800)
