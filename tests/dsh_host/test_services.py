"""The service registry: services by name, ready-made or built when first asked for."""

from __future__ import annotations

import threading

import pytest

from dsh_host import Services


class Counted:
    """A factory that counts its builds."""

    def __init__(self) -> None:
        self.builds = 0

    def __call__(self) -> object:
        self.builds += 1
        return object()


def test_a_factory_builds_its_service_once_on_first_use():
    services, build = Services(), Counted()
    services.register_factory("slow", build)

    assert build.builds == 0
    assert "slow" in services and list(services) == ["slow"]
    first = services.slow
    assert services.get("slow") is first and services.slow is first
    assert build.builds == 1


def test_names_are_listed_in_registration_order_whatever_their_kind():
    services = Services()
    services.register("a", 1)
    services.register_factory("b", lambda: 2)
    services.register("c", 3)

    assert list(services) == ["a", "b", "c"]
    assert [services.get(name) for name in services] == [1, 2, 3]


@pytest.mark.parametrize("first", ["register", "register_factory"])
@pytest.mark.parametrize("second", ["register", "register_factory"])
def test_a_name_is_taken_by_either_kind_of_registration(first, second):
    services = Services()
    getattr(services, first)("x", lambda: 1)

    with pytest.raises(ValueError, match="service 'x' is already registered"):
        getattr(services, second)("x", lambda: 2)


def test_a_plugins_unbuilt_services_go_when_it_unmounts_and_are_never_built():
    services, build = Services(), Counted()
    with services.owned_by("lazy-plugin"):
        services.register_factory("lazy", build)
    assert services.owner_of("lazy") == "lazy-plugin"

    services.unregister_owned_by("lazy-plugin")

    assert "lazy" not in services and services.get("lazy") is None and build.builds == 0
    with pytest.raises(AttributeError, match="service 'lazy' is not mounted"):
        _ = services.lazy


def test_what_a_factory_raises_reaches_the_caller_and_the_next_use_tries_again():
    services = Services()
    attempts = iter([RuntimeError("not yet"), "built"])

    def build() -> object:
        outcome = next(attempts)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    services.register_factory("flaky", build)

    with pytest.raises(RuntimeError, match="not yet"):
        services.get("flaky")
    assert services.flaky == "built"


def test_a_factory_may_use_another_service_built_on_demand():
    services = Services()
    services.register_factory("inner", lambda: "inner")
    services.register_factory("outer", lambda: f"outer of {services.inner}")

    assert services.outer == "outer of inner"


def test_threads_asking_at_once_get_one_service():
    services = Services()
    release = threading.Event()
    builds: list[int] = []

    def build() -> object:
        builds.append(1)
        release.wait()  # every other thread asks while this build holds the registry's lock
        return object()

    services.register_factory("shared", build)
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(services.shared)) for _ in range(4)]
    for thread in threads:
        thread.start()
    release.set()
    for thread in threads:
        thread.join()

    assert len(builds) == 1 and len(got) == 4 and all(service is got[0] for service in got)


def test_an_absent_service_is_none_or_an_attribute_error():
    services = Services()

    assert services.get("missing") is None and services.get("missing", 7) == 7
    with pytest.raises(AttributeError, match="service 'missing' is not mounted"):
        _ = services.missing
