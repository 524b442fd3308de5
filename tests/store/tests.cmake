# Scheduler stores: one conformance suite per interface, run on every implementation.
# unit: the in-memory implementations and pure helpers. integration: Postgres and Redis, real
# servers (RINGMASTER_TEST_PG_URL from scripts/test; redis-server started per test).
set(STORE_TEST_DIR ${CMAKE_CURRENT_LIST_DIR})
ringmaster_test(scheduler_store_unit_test unit
  SOURCES ${STORE_TEST_DIR}/in_memory_store_test.cc
          ${STORE_TEST_DIR}/fault_injecting_job_store.cc
          ${STORE_TEST_DIR}/job_store_conformance.cc
          ${STORE_TEST_DIR}/queue_store_conformance.cc
          ${STORE_TEST_DIR}/volume_store_conformance.cc
          ${STORE_TEST_DIR}/registry_store_conformance.cc
          ${STORE_TEST_DIR}/coordination_conformance.cc
  LIBS ringmaster_scheduler_store ringmaster_test_support)
ringmaster_test(scheduler_store_integration_test integration
  SOURCES ${STORE_TEST_DIR}/postgres_job_store_test.cc
          ${STORE_TEST_DIR}/redis_coordination_test.cc
          ${STORE_TEST_DIR}/job_store_conformance.cc
          ${STORE_TEST_DIR}/queue_store_conformance.cc
          ${STORE_TEST_DIR}/volume_store_conformance.cc
          ${STORE_TEST_DIR}/registry_store_conformance.cc
          ${STORE_TEST_DIR}/coordination_conformance.cc
  LIBS ringmaster_scheduler_store ringmaster_test_support)
