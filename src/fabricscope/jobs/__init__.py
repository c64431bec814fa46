"""Running one thing on many hosts: who each rank is (launch), and how the ranks meet (rendezvous).

Used by bench, topology and fleet alike, so it sits below them in the domain layer.
"""
