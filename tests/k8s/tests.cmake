# k8s/: every kustomization renders (kubectl kustomize, offline), every object validates against
# the Kubernetes schemas, and the flags and RINGMASTER_* variables in the manifests are ones the
# binaries accept (their --help and their parser). Needs kubectl, node/npm and promtool; the npm
# packages (tests/k8s/package-lock.json) are installed once into the build tree.
if(TARGET ringmaster-scheduler AND TARGET ringmaster-worker AND TARGET ringmaster-metrics)
  add_test(NAME k8s_manifests_test
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/run.sh ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}
      $<TARGET_FILE:ringmaster-scheduler> $<TARGET_FILE:ringmaster-worker>
      $<TARGET_FILE:ringmaster-metrics>)
  set_tests_properties(k8s_manifests_test PROPERTIES LABELS integration TIMEOUT 300)
endif()
