--
-- PostgreSQL database dump
--

\restrict P6cDDe20jtcaorlFfcjwFxygxNDa4JHKcxJ8Ev5cjMyCvij5UZZ9M4ryPeIqafj

-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: customers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.customers (
    id integer NOT NULL,
    customer character varying(60),
    amount numeric(12,2) NOT NULL,
    flag smallint NOT NULL,
    placed_at timestamp without time zone
);


--
-- Name: orders; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.orders (
    id integer NOT NULL,
    customer character varying(60),
    amount numeric(12,2) NOT NULL,
    flag smallint NOT NULL,
    placed_at timestamp without time zone
);


--
-- Data for Name: customers; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.customers VALUES (3, 'cust-1 ''quoted'' ü', 0.25, 1, '2024-03-01 12:00:37');
INSERT INTO public.customers VALUES (6, 'cust-2 ''quoted'' ü', 0.50, 0, '2024-03-01 12:01:14');
INSERT INTO public.customers VALUES (9, 'cust-3 ''quoted'' ü', 0.75, 1, '2024-03-01 12:01:51');
INSERT INTO public.customers VALUES (12, 'cust-4 ''quoted'' ü', 1.00, 0, '2024-03-01 12:02:28');
INSERT INTO public.customers VALUES (15, 'cust-5 ''quoted'' ü', 1.25, 1, '2024-03-01 12:03:05');
INSERT INTO public.customers VALUES (18, 'cust-6 ''quoted'' ü', 1.50, 0, '2024-03-01 12:03:42');
INSERT INTO public.customers VALUES (21, 'cust-7 ''quoted'' ü', 1.75, 1, '2024-03-01 12:04:19');
INSERT INTO public.customers VALUES (24, 'cust-8 ''quoted'' ü', 2.00, 0, '2024-03-01 12:04:56');
INSERT INTO public.customers VALUES (27, 'cust-9 ''quoted'' ü', 2.25, 1, '2024-03-01 12:05:33');
INSERT INTO public.customers VALUES (30, 'cust-10 ''quoted'' ü', 2.50, 0, '2024-03-01 12:06:10');
INSERT INTO public.customers VALUES (33, 'cust-11 ''quoted'' ü', 2.75, 1, '2024-03-01 12:06:47');
INSERT INTO public.customers VALUES (36, 'cust-12 ''quoted'' ü', 3.00, 0, '2024-03-01 12:07:24');
INSERT INTO public.customers VALUES (39, 'cust-13 ''quoted'' ü', 3.25, 1, '2024-03-01 12:08:01');
INSERT INTO public.customers VALUES (42, 'cust-14 ''quoted'' ü', 3.50, 0, '2024-03-01 12:08:38');
INSERT INTO public.customers VALUES (45, 'cust-15 ''quoted'' ü', 3.75, 1, '2024-03-01 12:09:15');
INSERT INTO public.customers VALUES (48, 'cust-16 ''quoted'' ü', 4.00, 0, '2024-03-01 12:09:52');
INSERT INTO public.customers VALUES (51, NULL, 4.25, 1, '2024-03-01 12:10:29');
INSERT INTO public.customers VALUES (54, 'cust-18 ''quoted'' ü', 4.50, 0, '2024-03-01 12:11:06');
INSERT INTO public.customers VALUES (57, 'cust-19 ''quoted'' ü', 4.75, 1, '2024-03-01 12:11:43');
INSERT INTO public.customers VALUES (60, 'cust-20 ''quoted'' ü', 5.00, 0, '2024-03-01 12:12:20');
INSERT INTO public.customers VALUES (63, 'cust-21 ''quoted'' ü', 5.25, 1, '2024-03-01 12:12:57');
INSERT INTO public.customers VALUES (66, 'cust-22 ''quoted'' ü', 5.50, 0, '2024-03-01 12:13:34');
INSERT INTO public.customers VALUES (69, 'cust-23 ''quoted'' ü', 5.75, 1, NULL);
INSERT INTO public.customers VALUES (72, 'cust-24 ''quoted'' ü', 6.00, 0, '2024-03-01 12:14:48');
INSERT INTO public.customers VALUES (75, 'cust-25 ''quoted'' ü', 6.25, 1, '2024-03-01 12:15:25');
INSERT INTO public.customers VALUES (78, 'cust-26 ''quoted'' ü', 6.50, 0, '2024-03-01 12:16:02');
INSERT INTO public.customers VALUES (81, 'cust-27 ''quoted'' ü', 6.75, 1, '2024-03-01 12:16:39');
INSERT INTO public.customers VALUES (84, 'cust-28 ''quoted'' ü', 7.00, 0, '2024-03-01 12:17:16');
INSERT INTO public.customers VALUES (87, 'cust-29 ''quoted'' ü', 7.25, 1, '2024-03-01 12:17:53');
INSERT INTO public.customers VALUES (90, 'cust-30 ''quoted'' ü', 7.50, 0, '2024-03-01 12:18:30');
INSERT INTO public.customers VALUES (93, 'cust-31 ''quoted'' ü', 7.75, 1, '2024-03-01 12:19:07');
INSERT INTO public.customers VALUES (96, 'cust-32 ''quoted'' ü', 8.00, 0, '2024-03-01 12:19:44');
INSERT INTO public.customers VALUES (99, 'cust-33 ''quoted'' ü', 8.25, 1, '2024-03-01 12:20:21');
INSERT INTO public.customers VALUES (102, NULL, 8.50, 0, '2024-03-01 12:20:58');
INSERT INTO public.customers VALUES (105, 'cust-35 ''quoted'' ü', 8.75, 1, '2024-03-01 12:21:35');
INSERT INTO public.customers VALUES (108, 'cust-36 ''quoted'' ü', 9.00, 0, '2024-03-01 12:22:12');
INSERT INTO public.customers VALUES (111, 'cust-37 ''quoted'' ü', 9.25, 1, '2024-03-01 12:22:49');
INSERT INTO public.customers VALUES (114, 'cust-38 ''quoted'' ü', 9.50, 0, '2024-03-01 12:23:26');
INSERT INTO public.customers VALUES (117, 'cust-39 ''quoted'' ü', 9.75, 1, '2024-03-01 12:24:03');
INSERT INTO public.customers VALUES (120, 'cust-40 ''quoted'' ü', 10.00, 0, '2024-03-01 12:24:40');
INSERT INTO public.customers VALUES (123, 'cust-41 ''quoted'' ü', 10.25, 1, '2024-03-01 12:25:17');
INSERT INTO public.customers VALUES (126, 'cust-42 ''quoted'' ü', 10.50, 0, '2024-03-01 12:25:54');
INSERT INTO public.customers VALUES (129, 'cust-43 ''quoted'' ü', 10.75, 1, '2024-03-01 12:26:31');
INSERT INTO public.customers VALUES (132, 'cust-44 ''quoted'' ü', 11.00, 0, '2024-03-01 12:27:08');
INSERT INTO public.customers VALUES (135, 'cust-45 ''quoted'' ü', 11.25, 1, '2024-03-01 12:27:45');
INSERT INTO public.customers VALUES (138, 'cust-46 ''quoted'' ü', 11.50, 0, NULL);
INSERT INTO public.customers VALUES (141, 'cust-47 ''quoted'' ü', 11.75, 1, '2024-03-01 12:28:59');
INSERT INTO public.customers VALUES (144, 'cust-48 ''quoted'' ü', 12.00, 0, '2024-03-01 12:29:36');
INSERT INTO public.customers VALUES (147, 'cust-49 ''quoted'' ü', 12.25, 1, '2024-03-01 12:30:13');
INSERT INTO public.customers VALUES (150, 'cust-50 ''quoted'' ü', 12.50, 0, '2024-03-01 12:30:50');
INSERT INTO public.customers VALUES (153, NULL, 12.75, 1, '2024-03-01 12:31:27');
INSERT INTO public.customers VALUES (156, 'cust-52 ''quoted'' ü', 13.00, 0, '2024-03-01 12:32:04');
INSERT INTO public.customers VALUES (159, 'cust-53 ''quoted'' ü', 13.25, 1, '2024-03-01 12:32:41');
INSERT INTO public.customers VALUES (162, 'cust-54 ''quoted'' ü', 13.50, 0, '2024-03-01 12:33:18');
INSERT INTO public.customers VALUES (165, 'cust-55 ''quoted'' ü', 13.75, 1, '2024-03-01 12:33:55');
INSERT INTO public.customers VALUES (168, 'cust-56 ''quoted'' ü', 14.00, 0, '2024-03-01 12:34:32');
INSERT INTO public.customers VALUES (171, 'cust-57 ''quoted'' ü', 14.25, 1, '2024-03-01 12:35:09');
INSERT INTO public.customers VALUES (174, 'cust-58 ''quoted'' ü', 14.50, 0, '2024-03-01 12:35:46');
INSERT INTO public.customers VALUES (177, 'cust-59 ''quoted'' ü', 14.75, 1, '2024-03-01 12:36:23');
INSERT INTO public.customers VALUES (180, 'cust-60 ''quoted'' ü', 15.00, 0, '2024-03-01 12:37:00');
INSERT INTO public.customers VALUES (183, 'cust-61 ''quoted'' ü', 15.25, 1, '2024-03-01 12:37:37');
INSERT INTO public.customers VALUES (186, 'cust-62 ''quoted'' ü', 15.50, 0, '2024-03-01 12:38:14');
INSERT INTO public.customers VALUES (189, 'cust-63 ''quoted'' ü', 15.75, 1, '2024-03-01 12:38:51');
INSERT INTO public.customers VALUES (192, 'cust-64 ''quoted'' ü', 16.00, 0, '2024-03-01 12:39:28');
INSERT INTO public.customers VALUES (195, 'cust-65 ''quoted'' ü', 16.25, 1, '2024-03-01 12:40:05');
INSERT INTO public.customers VALUES (198, 'cust-66 ''quoted'' ü', 16.50, 0, '2024-03-01 12:40:42');
INSERT INTO public.customers VALUES (201, 'cust-67 ''quoted'' ü', 16.75, 1, '2024-03-01 12:41:19');
INSERT INTO public.customers VALUES (204, NULL, 17.00, 0, '2024-03-01 12:41:56');
INSERT INTO public.customers VALUES (207, 'cust-69 ''quoted'' ü', 17.25, 1, NULL);
INSERT INTO public.customers VALUES (210, 'cust-70 ''quoted'' ü', 17.50, 0, '2024-03-01 12:43:10');
INSERT INTO public.customers VALUES (213, 'cust-71 ''quoted'' ü', 17.75, 1, '2024-03-01 12:43:47');
INSERT INTO public.customers VALUES (216, 'cust-72 ''quoted'' ü', 18.00, 0, '2024-03-01 12:44:24');
INSERT INTO public.customers VALUES (219, 'cust-73 ''quoted'' ü', 18.25, 1, '2024-03-01 12:45:01');
INSERT INTO public.customers VALUES (222, 'cust-74 ''quoted'' ü', 18.50, 0, '2024-03-01 12:45:38');
INSERT INTO public.customers VALUES (225, 'cust-75 ''quoted'' ü', 18.75, 1, '2024-03-01 12:46:15');
INSERT INTO public.customers VALUES (228, 'cust-76 ''quoted'' ü', 19.00, 0, '2024-03-01 12:46:52');
INSERT INTO public.customers VALUES (231, 'cust-77 ''quoted'' ü', 19.25, 1, '2024-03-01 12:47:29');
INSERT INTO public.customers VALUES (234, 'cust-78 ''quoted'' ü', 19.50, 0, '2024-03-01 12:48:06');
INSERT INTO public.customers VALUES (237, 'cust-79 ''quoted'' ü', 19.75, 1, '2024-03-01 12:48:43');
INSERT INTO public.customers VALUES (240, 'cust-80 ''quoted'' ü', 20.00, 0, '2024-03-01 12:49:20');
INSERT INTO public.customers VALUES (243, 'cust-81 ''quoted'' ü', 20.25, 1, '2024-03-01 12:49:57');
INSERT INTO public.customers VALUES (246, 'cust-82 ''quoted'' ü', 20.50, 0, '2024-03-01 12:50:34');
INSERT INTO public.customers VALUES (249, 'cust-83 ''quoted'' ü', 20.75, 1, '2024-03-01 12:51:11');
INSERT INTO public.customers VALUES (252, 'cust-84 ''quoted'' ü', 21.00, 0, '2024-03-01 12:51:48');
INSERT INTO public.customers VALUES (255, NULL, 21.25, 1, '2024-03-01 12:52:25');
INSERT INTO public.customers VALUES (258, 'cust-86 ''quoted'' ü', 21.50, 0, '2024-03-01 12:53:02');
INSERT INTO public.customers VALUES (261, 'cust-87 ''quoted'' ü', 21.75, 1, '2024-03-01 12:53:39');
INSERT INTO public.customers VALUES (264, 'cust-88 ''quoted'' ü', 22.00, 0, '2024-03-01 12:54:16');
INSERT INTO public.customers VALUES (267, 'cust-89 ''quoted'' ü', 22.25, 1, '2024-03-01 12:54:53');
INSERT INTO public.customers VALUES (270, 'cust-90 ''quoted'' ü', 22.50, 0, '2024-03-01 12:55:30');
INSERT INTO public.customers VALUES (273, 'cust-91 ''quoted'' ü', 22.75, 1, '2024-03-01 12:56:07');
INSERT INTO public.customers VALUES (276, 'cust-92 ''quoted'' ü', 23.00, 0, NULL);
INSERT INTO public.customers VALUES (279, 'cust-93 ''quoted'' ü', 23.25, 1, '2024-03-01 12:57:21');
INSERT INTO public.customers VALUES (282, 'cust-94 ''quoted'' ü', 23.50, 0, '2024-03-01 12:57:58');
INSERT INTO public.customers VALUES (285, 'cust-95 ''quoted'' ü', 23.75, 1, '2024-03-01 12:58:35');
INSERT INTO public.customers VALUES (288, 'cust-96 ''quoted'' ü', 24.00, 0, '2024-03-01 12:59:12');
INSERT INTO public.customers VALUES (291, 'cust-0 ''quoted'' ü', 24.25, 1, '2024-03-01 12:59:49');
INSERT INTO public.customers VALUES (294, 'cust-1 ''quoted'' ü', 24.50, 0, '2024-03-01 13:00:26');
INSERT INTO public.customers VALUES (297, 'cust-2 ''quoted'' ü', 24.75, 1, '2024-03-01 13:01:03');
INSERT INTO public.customers VALUES (300, 'cust-3 ''quoted'' ü', 25.00, 0, '2024-03-01 13:01:40');
INSERT INTO public.customers VALUES (303, 'cust-4 ''quoted'' ü', 25.25, 1, '2024-03-01 13:02:17');
INSERT INTO public.customers VALUES (306, NULL, 25.50, 0, '2024-03-01 13:02:54');
INSERT INTO public.customers VALUES (309, 'cust-6 ''quoted'' ü', 25.75, 1, '2024-03-01 13:03:31');
INSERT INTO public.customers VALUES (312, 'cust-7 ''quoted'' ü', 26.00, 0, '2024-03-01 13:04:08');
INSERT INTO public.customers VALUES (315, 'cust-8 ''quoted'' ü', 26.25, 1, '2024-03-01 13:04:45');
INSERT INTO public.customers VALUES (318, 'cust-9 ''quoted'' ü', 26.50, 0, '2024-03-01 13:05:22');
INSERT INTO public.customers VALUES (321, 'cust-10 ''quoted'' ü', 26.75, 1, '2024-03-01 13:05:59');
INSERT INTO public.customers VALUES (324, 'cust-11 ''quoted'' ü', 27.00, 0, '2024-03-01 13:06:36');
INSERT INTO public.customers VALUES (327, 'cust-12 ''quoted'' ü', 27.25, 1, '2024-03-01 13:07:13');
INSERT INTO public.customers VALUES (330, 'cust-13 ''quoted'' ü', 27.50, 0, '2024-03-01 13:07:50');
INSERT INTO public.customers VALUES (333, 'cust-14 ''quoted'' ü', 27.75, 1, '2024-03-01 13:08:27');
INSERT INTO public.customers VALUES (336, 'cust-15 ''quoted'' ü', 28.00, 0, '2024-03-01 13:09:04');
INSERT INTO public.customers VALUES (339, 'cust-16 ''quoted'' ü', 28.25, 1, '2024-03-01 13:09:41');
INSERT INTO public.customers VALUES (342, 'cust-17 ''quoted'' ü', 28.50, 0, '2024-03-01 13:10:18');
INSERT INTO public.customers VALUES (345, 'cust-18 ''quoted'' ü', 28.75, 1, NULL);
INSERT INTO public.customers VALUES (348, 'cust-19 ''quoted'' ü', 29.00, 0, '2024-03-01 13:11:32');
INSERT INTO public.customers VALUES (351, 'cust-20 ''quoted'' ü', 29.25, 1, '2024-03-01 13:12:09');
INSERT INTO public.customers VALUES (354, 'cust-21 ''quoted'' ü', 29.50, 0, '2024-03-01 13:12:46');
INSERT INTO public.customers VALUES (357, NULL, 29.75, 1, '2024-03-01 13:13:23');
INSERT INTO public.customers VALUES (360, 'cust-23 ''quoted'' ü', 30.00, 0, '2024-03-01 13:14:00');
INSERT INTO public.customers VALUES (363, 'cust-24 ''quoted'' ü', 30.25, 1, '2024-03-01 13:14:37');
INSERT INTO public.customers VALUES (366, 'cust-25 ''quoted'' ü', 30.50, 0, '2024-03-01 13:15:14');
INSERT INTO public.customers VALUES (369, 'cust-26 ''quoted'' ü', 30.75, 1, '2024-03-01 13:15:51');
INSERT INTO public.customers VALUES (372, 'cust-27 ''quoted'' ü', 31.00, 0, '2024-03-01 13:16:28');
INSERT INTO public.customers VALUES (375, 'cust-28 ''quoted'' ü', 31.25, 1, '2024-03-01 13:17:05');
INSERT INTO public.customers VALUES (378, 'cust-29 ''quoted'' ü', 31.50, 0, '2024-03-01 13:17:42');
INSERT INTO public.customers VALUES (381, 'cust-30 ''quoted'' ü', 31.75, 1, '2024-03-01 13:18:19');
INSERT INTO public.customers VALUES (384, 'cust-31 ''quoted'' ü', 32.00, 0, '2024-03-01 13:18:56');
INSERT INTO public.customers VALUES (387, 'cust-32 ''quoted'' ü', 32.25, 1, '2024-03-01 13:19:33');
INSERT INTO public.customers VALUES (390, 'cust-33 ''quoted'' ü', 32.50, 0, '2024-03-01 13:20:10');
INSERT INTO public.customers VALUES (393, 'cust-34 ''quoted'' ü', 32.75, 1, '2024-03-01 13:20:47');
INSERT INTO public.customers VALUES (396, 'cust-35 ''quoted'' ü', 33.00, 0, '2024-03-01 13:21:24');
INSERT INTO public.customers VALUES (399, 'cust-36 ''quoted'' ü', 33.25, 1, '2024-03-01 13:22:01');
INSERT INTO public.customers VALUES (402, 'cust-37 ''quoted'' ü', 33.50, 0, '2024-03-01 13:22:38');
INSERT INTO public.customers VALUES (405, 'cust-38 ''quoted'' ü', 33.75, 1, '2024-03-01 13:23:15');
INSERT INTO public.customers VALUES (408, NULL, 34.00, 0, '2024-03-01 13:23:52');
INSERT INTO public.customers VALUES (411, 'cust-40 ''quoted'' ü', 34.25, 1, '2024-03-01 13:24:29');
INSERT INTO public.customers VALUES (414, 'cust-41 ''quoted'' ü', 34.50, 0, NULL);
INSERT INTO public.customers VALUES (417, 'cust-42 ''quoted'' ü', 34.75, 1, '2024-03-01 13:25:43');
INSERT INTO public.customers VALUES (420, 'cust-43 ''quoted'' ü', 35.00, 0, '2024-03-01 13:26:20');
INSERT INTO public.customers VALUES (423, 'cust-44 ''quoted'' ü', 35.25, 1, '2024-03-01 13:26:57');
INSERT INTO public.customers VALUES (426, 'cust-45 ''quoted'' ü', 35.50, 0, '2024-03-01 13:27:34');
INSERT INTO public.customers VALUES (429, 'cust-46 ''quoted'' ü', 35.75, 1, '2024-03-01 13:28:11');
INSERT INTO public.customers VALUES (432, 'cust-47 ''quoted'' ü', 36.00, 0, '2024-03-01 13:28:48');
INSERT INTO public.customers VALUES (435, 'cust-48 ''quoted'' ü', 36.25, 1, '2024-03-01 13:29:25');
INSERT INTO public.customers VALUES (438, 'cust-49 ''quoted'' ü', 36.50, 0, '2024-03-01 13:30:02');
INSERT INTO public.customers VALUES (441, 'cust-50 ''quoted'' ü', 36.75, 1, '2024-03-01 13:30:39');
INSERT INTO public.customers VALUES (444, 'cust-51 ''quoted'' ü', 37.00, 0, '2024-03-01 13:31:16');
INSERT INTO public.customers VALUES (447, 'cust-52 ''quoted'' ü', 37.25, 1, '2024-03-01 13:31:53');
INSERT INTO public.customers VALUES (450, 'cust-53 ''quoted'' ü', 37.50, 0, '2024-03-01 13:32:30');
INSERT INTO public.customers VALUES (453, 'cust-54 ''quoted'' ü', 37.75, 1, '2024-03-01 13:33:07');
INSERT INTO public.customers VALUES (456, 'cust-55 ''quoted'' ü', 38.00, 0, '2024-03-01 13:33:44');
INSERT INTO public.customers VALUES (459, NULL, 38.25, 1, '2024-03-01 13:34:21');
INSERT INTO public.customers VALUES (462, 'cust-57 ''quoted'' ü', 38.50, 0, '2024-03-01 13:34:58');
INSERT INTO public.customers VALUES (465, 'cust-58 ''quoted'' ü', 38.75, 1, '2024-03-01 13:35:35');
INSERT INTO public.customers VALUES (468, 'cust-59 ''quoted'' ü', 39.00, 0, '2024-03-01 13:36:12');
INSERT INTO public.customers VALUES (471, 'cust-60 ''quoted'' ü', 39.25, 1, '2024-03-01 13:36:49');
INSERT INTO public.customers VALUES (474, 'cust-61 ''quoted'' ü', 39.50, 0, '2024-03-01 13:37:26');
INSERT INTO public.customers VALUES (477, 'cust-62 ''quoted'' ü', 39.75, 1, '2024-03-01 13:38:03');
INSERT INTO public.customers VALUES (480, 'cust-63 ''quoted'' ü', 40.00, 0, '2024-03-01 13:38:40');
INSERT INTO public.customers VALUES (483, 'cust-64 ''quoted'' ü', 40.25, 1, NULL);
INSERT INTO public.customers VALUES (486, 'cust-65 ''quoted'' ü', 40.50, 0, '2024-03-01 13:39:54');
INSERT INTO public.customers VALUES (489, 'cust-66 ''quoted'' ü', 40.75, 1, '2024-03-01 13:40:31');
INSERT INTO public.customers VALUES (492, 'cust-67 ''quoted'' ü', 41.00, 0, '2024-03-01 13:41:08');
INSERT INTO public.customers VALUES (495, 'cust-68 ''quoted'' ü', 41.25, 1, '2024-03-01 13:41:45');
INSERT INTO public.customers VALUES (498, 'cust-69 ''quoted'' ü', 41.50, 0, '2024-03-01 13:42:22');
INSERT INTO public.customers VALUES (501, 'cust-70 ''quoted'' ü', 41.75, 1, '2024-03-01 13:42:59');
INSERT INTO public.customers VALUES (504, 'cust-71 ''quoted'' ü', 42.00, 0, '2024-03-01 13:43:36');
INSERT INTO public.customers VALUES (507, 'cust-72 ''quoted'' ü', 42.25, 1, '2024-03-01 13:44:13');
INSERT INTO public.customers VALUES (510, NULL, 42.50, 0, '2024-03-01 13:44:50');
INSERT INTO public.customers VALUES (513, 'cust-74 ''quoted'' ü', 42.75, 1, '2024-03-01 13:45:27');
INSERT INTO public.customers VALUES (516, 'cust-75 ''quoted'' ü', 43.00, 0, '2024-03-01 13:46:04');
INSERT INTO public.customers VALUES (519, 'cust-76 ''quoted'' ü', 43.25, 1, '2024-03-01 13:46:41');
INSERT INTO public.customers VALUES (522, 'cust-77 ''quoted'' ü', 43.50, 0, '2024-03-01 13:47:18');
INSERT INTO public.customers VALUES (525, 'cust-78 ''quoted'' ü', 43.75, 1, '2024-03-01 13:47:55');
INSERT INTO public.customers VALUES (528, 'cust-79 ''quoted'' ü', 44.00, 0, '2024-03-01 13:48:32');
INSERT INTO public.customers VALUES (531, 'cust-80 ''quoted'' ü', 44.25, 1, '2024-03-01 13:49:09');
INSERT INTO public.customers VALUES (534, 'cust-81 ''quoted'' ü', 44.50, 0, '2024-03-01 13:49:46');
INSERT INTO public.customers VALUES (537, 'cust-82 ''quoted'' ü', 44.75, 1, '2024-03-01 13:50:23');
INSERT INTO public.customers VALUES (540, 'cust-83 ''quoted'' ü', 45.00, 0, '2024-03-01 13:51:00');
INSERT INTO public.customers VALUES (543, 'cust-84 ''quoted'' ü', 45.25, 1, '2024-03-01 13:51:37');
INSERT INTO public.customers VALUES (546, 'cust-85 ''quoted'' ü', 45.50, 0, '2024-03-01 13:52:14');
INSERT INTO public.customers VALUES (549, 'cust-86 ''quoted'' ü', 45.75, 1, '2024-03-01 13:52:51');
INSERT INTO public.customers VALUES (552, 'cust-87 ''quoted'' ü', 46.00, 0, NULL);
INSERT INTO public.customers VALUES (555, 'cust-88 ''quoted'' ü', 46.25, 1, '2024-03-01 13:54:05');
INSERT INTO public.customers VALUES (558, 'cust-89 ''quoted'' ü', 46.50, 0, '2024-03-01 13:54:42');
INSERT INTO public.customers VALUES (561, NULL, 46.75, 1, '2024-03-01 13:55:19');
INSERT INTO public.customers VALUES (564, 'cust-91 ''quoted'' ü', 47.00, 0, '2024-03-01 13:55:56');
INSERT INTO public.customers VALUES (567, 'cust-92 ''quoted'' ü', 47.25, 1, '2024-03-01 13:56:33');
INSERT INTO public.customers VALUES (570, 'cust-93 ''quoted'' ü', 47.50, 0, '2024-03-01 13:57:10');
INSERT INTO public.customers VALUES (573, 'cust-94 ''quoted'' ü', 47.75, 1, '2024-03-01 13:57:47');
INSERT INTO public.customers VALUES (576, 'cust-95 ''quoted'' ü', 48.00, 0, '2024-03-01 13:58:24');
INSERT INTO public.customers VALUES (579, 'cust-96 ''quoted'' ü', 48.25, 1, '2024-03-01 13:59:01');
INSERT INTO public.customers VALUES (582, 'cust-0 ''quoted'' ü', 48.50, 0, '2024-03-01 13:59:38');
INSERT INTO public.customers VALUES (585, 'cust-1 ''quoted'' ü', 48.75, 1, '2024-03-01 14:00:15');
INSERT INTO public.customers VALUES (588, 'cust-2 ''quoted'' ü', 49.00, 0, '2024-03-01 14:00:52');
INSERT INTO public.customers VALUES (591, 'cust-3 ''quoted'' ü', 49.25, 1, '2024-03-01 14:01:29');
INSERT INTO public.customers VALUES (594, 'cust-4 ''quoted'' ü', 49.50, 0, '2024-03-01 14:02:06');
INSERT INTO public.customers VALUES (597, 'cust-5 ''quoted'' ü', 49.75, 1, '2024-03-01 14:02:43');
INSERT INTO public.customers VALUES (600, 'cust-6 ''quoted'' ü', 50.00, 0, '2024-03-01 14:03:20');


--
-- Data for Name: orders; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.orders VALUES (3, 'cust-1 ''quoted'' ü', 0.25, 1, '2024-03-01 12:00:37');
INSERT INTO public.orders VALUES (6, 'cust-2 ''quoted'' ü', 0.50, 0, '2024-03-01 12:01:14');
INSERT INTO public.orders VALUES (9, 'cust-3 ''quoted'' ü', 0.75, 1, '2024-03-01 12:01:51');
INSERT INTO public.orders VALUES (12, 'cust-4 ''quoted'' ü', 1.00, 0, '2024-03-01 12:02:28');
INSERT INTO public.orders VALUES (15, 'cust-5 ''quoted'' ü', 1.25, 1, '2024-03-01 12:03:05');
INSERT INTO public.orders VALUES (18, 'cust-6 ''quoted'' ü', 1.50, 0, '2024-03-01 12:03:42');
INSERT INTO public.orders VALUES (21, 'cust-7 ''quoted'' ü', 1.75, 1, '2024-03-01 12:04:19');
INSERT INTO public.orders VALUES (24, 'cust-8 ''quoted'' ü', 2.00, 0, '2024-03-01 12:04:56');
INSERT INTO public.orders VALUES (27, 'cust-9 ''quoted'' ü', 2.25, 1, '2024-03-01 12:05:33');
INSERT INTO public.orders VALUES (30, 'cust-10 ''quoted'' ü', 2.50, 0, '2024-03-01 12:06:10');
INSERT INTO public.orders VALUES (33, 'cust-11 ''quoted'' ü', 2.75, 1, '2024-03-01 12:06:47');
INSERT INTO public.orders VALUES (36, 'cust-12 ''quoted'' ü', 3.00, 0, '2024-03-01 12:07:24');
INSERT INTO public.orders VALUES (39, 'cust-13 ''quoted'' ü', 3.25, 1, '2024-03-01 12:08:01');
INSERT INTO public.orders VALUES (42, 'cust-14 ''quoted'' ü', 3.50, 0, '2024-03-01 12:08:38');
INSERT INTO public.orders VALUES (45, 'cust-15 ''quoted'' ü', 3.75, 1, '2024-03-01 12:09:15');
INSERT INTO public.orders VALUES (48, 'cust-16 ''quoted'' ü', 4.00, 0, '2024-03-01 12:09:52');
INSERT INTO public.orders VALUES (51, NULL, 4.25, 1, '2024-03-01 12:10:29');
INSERT INTO public.orders VALUES (54, 'cust-18 ''quoted'' ü', 4.50, 0, '2024-03-01 12:11:06');
INSERT INTO public.orders VALUES (57, 'cust-19 ''quoted'' ü', 4.75, 1, '2024-03-01 12:11:43');
INSERT INTO public.orders VALUES (60, 'cust-20 ''quoted'' ü', 5.00, 0, '2024-03-01 12:12:20');
INSERT INTO public.orders VALUES (63, 'cust-21 ''quoted'' ü', 5.25, 1, '2024-03-01 12:12:57');
INSERT INTO public.orders VALUES (66, 'cust-22 ''quoted'' ü', 5.50, 0, '2024-03-01 12:13:34');
INSERT INTO public.orders VALUES (69, 'cust-23 ''quoted'' ü', 5.75, 1, NULL);
INSERT INTO public.orders VALUES (72, 'cust-24 ''quoted'' ü', 6.00, 0, '2024-03-01 12:14:48');
INSERT INTO public.orders VALUES (75, 'cust-25 ''quoted'' ü', 6.25, 1, '2024-03-01 12:15:25');
INSERT INTO public.orders VALUES (78, 'cust-26 ''quoted'' ü', 6.50, 0, '2024-03-01 12:16:02');
INSERT INTO public.orders VALUES (81, 'cust-27 ''quoted'' ü', 6.75, 1, '2024-03-01 12:16:39');
INSERT INTO public.orders VALUES (84, 'cust-28 ''quoted'' ü', 7.00, 0, '2024-03-01 12:17:16');
INSERT INTO public.orders VALUES (87, 'cust-29 ''quoted'' ü', 7.25, 1, '2024-03-01 12:17:53');
INSERT INTO public.orders VALUES (90, 'cust-30 ''quoted'' ü', 7.50, 0, '2024-03-01 12:18:30');
INSERT INTO public.orders VALUES (93, 'cust-31 ''quoted'' ü', 7.75, 1, '2024-03-01 12:19:07');
INSERT INTO public.orders VALUES (96, 'cust-32 ''quoted'' ü', 8.00, 0, '2024-03-01 12:19:44');
INSERT INTO public.orders VALUES (99, 'cust-33 ''quoted'' ü', 8.25, 1, '2024-03-01 12:20:21');
INSERT INTO public.orders VALUES (102, NULL, 8.50, 0, '2024-03-01 12:20:58');
INSERT INTO public.orders VALUES (105, 'cust-35 ''quoted'' ü', 8.75, 1, '2024-03-01 12:21:35');
INSERT INTO public.orders VALUES (108, 'cust-36 ''quoted'' ü', 9.00, 0, '2024-03-01 12:22:12');
INSERT INTO public.orders VALUES (111, 'cust-37 ''quoted'' ü', 9.25, 1, '2024-03-01 12:22:49');
INSERT INTO public.orders VALUES (114, 'cust-38 ''quoted'' ü', 9.50, 0, '2024-03-01 12:23:26');
INSERT INTO public.orders VALUES (117, 'cust-39 ''quoted'' ü', 9.75, 1, '2024-03-01 12:24:03');
INSERT INTO public.orders VALUES (120, 'cust-40 ''quoted'' ü', 10.00, 0, '2024-03-01 12:24:40');
INSERT INTO public.orders VALUES (123, 'cust-41 ''quoted'' ü', 10.25, 1, '2024-03-01 12:25:17');
INSERT INTO public.orders VALUES (126, 'cust-42 ''quoted'' ü', 10.50, 0, '2024-03-01 12:25:54');
INSERT INTO public.orders VALUES (129, 'cust-43 ''quoted'' ü', 10.75, 1, '2024-03-01 12:26:31');
INSERT INTO public.orders VALUES (132, 'cust-44 ''quoted'' ü', 11.00, 0, '2024-03-01 12:27:08');
INSERT INTO public.orders VALUES (135, 'cust-45 ''quoted'' ü', 11.25, 1, '2024-03-01 12:27:45');
INSERT INTO public.orders VALUES (138, 'cust-46 ''quoted'' ü', 11.50, 0, NULL);
INSERT INTO public.orders VALUES (141, 'cust-47 ''quoted'' ü', 11.75, 1, '2024-03-01 12:28:59');
INSERT INTO public.orders VALUES (144, 'cust-48 ''quoted'' ü', 12.00, 0, '2024-03-01 12:29:36');
INSERT INTO public.orders VALUES (147, 'cust-49 ''quoted'' ü', 12.25, 1, '2024-03-01 12:30:13');
INSERT INTO public.orders VALUES (150, 'cust-50 ''quoted'' ü', 12.50, 0, '2024-03-01 12:30:50');
INSERT INTO public.orders VALUES (153, NULL, 12.75, 1, '2024-03-01 12:31:27');
INSERT INTO public.orders VALUES (156, 'cust-52 ''quoted'' ü', 13.00, 0, '2024-03-01 12:32:04');
INSERT INTO public.orders VALUES (159, 'cust-53 ''quoted'' ü', 13.25, 1, '2024-03-01 12:32:41');
INSERT INTO public.orders VALUES (162, 'cust-54 ''quoted'' ü', 13.50, 0, '2024-03-01 12:33:18');
INSERT INTO public.orders VALUES (165, 'cust-55 ''quoted'' ü', 13.75, 1, '2024-03-01 12:33:55');
INSERT INTO public.orders VALUES (168, 'cust-56 ''quoted'' ü', 14.00, 0, '2024-03-01 12:34:32');
INSERT INTO public.orders VALUES (171, 'cust-57 ''quoted'' ü', 14.25, 1, '2024-03-01 12:35:09');
INSERT INTO public.orders VALUES (174, 'cust-58 ''quoted'' ü', 14.50, 0, '2024-03-01 12:35:46');
INSERT INTO public.orders VALUES (177, 'cust-59 ''quoted'' ü', 14.75, 1, '2024-03-01 12:36:23');
INSERT INTO public.orders VALUES (180, 'cust-60 ''quoted'' ü', 15.00, 0, '2024-03-01 12:37:00');
INSERT INTO public.orders VALUES (183, 'cust-61 ''quoted'' ü', 15.25, 1, '2024-03-01 12:37:37');
INSERT INTO public.orders VALUES (186, 'cust-62 ''quoted'' ü', 15.50, 0, '2024-03-01 12:38:14');
INSERT INTO public.orders VALUES (189, 'cust-63 ''quoted'' ü', 15.75, 1, '2024-03-01 12:38:51');
INSERT INTO public.orders VALUES (192, 'cust-64 ''quoted'' ü', 16.00, 0, '2024-03-01 12:39:28');
INSERT INTO public.orders VALUES (195, 'cust-65 ''quoted'' ü', 16.25, 1, '2024-03-01 12:40:05');
INSERT INTO public.orders VALUES (198, 'cust-66 ''quoted'' ü', 16.50, 0, '2024-03-01 12:40:42');
INSERT INTO public.orders VALUES (201, 'cust-67 ''quoted'' ü', 16.75, 1, '2024-03-01 12:41:19');
INSERT INTO public.orders VALUES (204, NULL, 17.00, 0, '2024-03-01 12:41:56');
INSERT INTO public.orders VALUES (207, 'cust-69 ''quoted'' ü', 17.25, 1, NULL);
INSERT INTO public.orders VALUES (210, 'cust-70 ''quoted'' ü', 17.50, 0, '2024-03-01 12:43:10');
INSERT INTO public.orders VALUES (213, 'cust-71 ''quoted'' ü', 17.75, 1, '2024-03-01 12:43:47');
INSERT INTO public.orders VALUES (216, 'cust-72 ''quoted'' ü', 18.00, 0, '2024-03-01 12:44:24');
INSERT INTO public.orders VALUES (219, 'cust-73 ''quoted'' ü', 18.25, 1, '2024-03-01 12:45:01');
INSERT INTO public.orders VALUES (222, 'cust-74 ''quoted'' ü', 18.50, 0, '2024-03-01 12:45:38');
INSERT INTO public.orders VALUES (225, 'cust-75 ''quoted'' ü', 18.75, 1, '2024-03-01 12:46:15');
INSERT INTO public.orders VALUES (228, 'cust-76 ''quoted'' ü', 19.00, 0, '2024-03-01 12:46:52');
INSERT INTO public.orders VALUES (231, 'cust-77 ''quoted'' ü', 19.25, 1, '2024-03-01 12:47:29');
INSERT INTO public.orders VALUES (234, 'cust-78 ''quoted'' ü', 19.50, 0, '2024-03-01 12:48:06');
INSERT INTO public.orders VALUES (237, 'cust-79 ''quoted'' ü', 19.75, 1, '2024-03-01 12:48:43');
INSERT INTO public.orders VALUES (240, 'cust-80 ''quoted'' ü', 20.00, 0, '2024-03-01 12:49:20');
INSERT INTO public.orders VALUES (243, 'cust-81 ''quoted'' ü', 20.25, 1, '2024-03-01 12:49:57');
INSERT INTO public.orders VALUES (246, 'cust-82 ''quoted'' ü', 20.50, 0, '2024-03-01 12:50:34');
INSERT INTO public.orders VALUES (249, 'cust-83 ''quoted'' ü', 20.75, 1, '2024-03-01 12:51:11');
INSERT INTO public.orders VALUES (252, 'cust-84 ''quoted'' ü', 21.00, 0, '2024-03-01 12:51:48');
INSERT INTO public.orders VALUES (255, NULL, 21.25, 1, '2024-03-01 12:52:25');
INSERT INTO public.orders VALUES (258, 'cust-86 ''quoted'' ü', 21.50, 0, '2024-03-01 12:53:02');
INSERT INTO public.orders VALUES (261, 'cust-87 ''quoted'' ü', 21.75, 1, '2024-03-01 12:53:39');
INSERT INTO public.orders VALUES (264, 'cust-88 ''quoted'' ü', 22.00, 0, '2024-03-01 12:54:16');
INSERT INTO public.orders VALUES (267, 'cust-89 ''quoted'' ü', 22.25, 1, '2024-03-01 12:54:53');
INSERT INTO public.orders VALUES (270, 'cust-90 ''quoted'' ü', 22.50, 0, '2024-03-01 12:55:30');
INSERT INTO public.orders VALUES (273, 'cust-91 ''quoted'' ü', 22.75, 1, '2024-03-01 12:56:07');
INSERT INTO public.orders VALUES (276, 'cust-92 ''quoted'' ü', 23.00, 0, NULL);
INSERT INTO public.orders VALUES (279, 'cust-93 ''quoted'' ü', 23.25, 1, '2024-03-01 12:57:21');
INSERT INTO public.orders VALUES (282, 'cust-94 ''quoted'' ü', 23.50, 0, '2024-03-01 12:57:58');
INSERT INTO public.orders VALUES (285, 'cust-95 ''quoted'' ü', 23.75, 1, '2024-03-01 12:58:35');
INSERT INTO public.orders VALUES (288, 'cust-96 ''quoted'' ü', 24.00, 0, '2024-03-01 12:59:12');
INSERT INTO public.orders VALUES (291, 'cust-0 ''quoted'' ü', 24.25, 1, '2024-03-01 12:59:49');
INSERT INTO public.orders VALUES (294, 'cust-1 ''quoted'' ü', 24.50, 0, '2024-03-01 13:00:26');
INSERT INTO public.orders VALUES (297, 'cust-2 ''quoted'' ü', 24.75, 1, '2024-03-01 13:01:03');
INSERT INTO public.orders VALUES (300, 'cust-3 ''quoted'' ü', 25.00, 0, '2024-03-01 13:01:40');
INSERT INTO public.orders VALUES (303, 'cust-4 ''quoted'' ü', 25.25, 1, '2024-03-01 13:02:17');
INSERT INTO public.orders VALUES (306, NULL, 25.50, 0, '2024-03-01 13:02:54');
INSERT INTO public.orders VALUES (309, 'cust-6 ''quoted'' ü', 25.75, 1, '2024-03-01 13:03:31');
INSERT INTO public.orders VALUES (312, 'cust-7 ''quoted'' ü', 26.00, 0, '2024-03-01 13:04:08');
INSERT INTO public.orders VALUES (315, 'cust-8 ''quoted'' ü', 26.25, 1, '2024-03-01 13:04:45');
INSERT INTO public.orders VALUES (318, 'cust-9 ''quoted'' ü', 26.50, 0, '2024-03-01 13:05:22');
INSERT INTO public.orders VALUES (321, 'cust-10 ''quoted'' ü', 26.75, 1, '2024-03-01 13:05:59');
INSERT INTO public.orders VALUES (324, 'cust-11 ''quoted'' ü', 27.00, 0, '2024-03-01 13:06:36');
INSERT INTO public.orders VALUES (327, 'cust-12 ''quoted'' ü', 27.25, 1, '2024-03-01 13:07:13');
INSERT INTO public.orders VALUES (330, 'cust-13 ''quoted'' ü', 27.50, 0, '2024-03-01 13:07:50');
INSERT INTO public.orders VALUES (333, 'cust-14 ''quoted'' ü', 27.75, 1, '2024-03-01 13:08:27');
INSERT INTO public.orders VALUES (336, 'cust-15 ''quoted'' ü', 28.00, 0, '2024-03-01 13:09:04');
INSERT INTO public.orders VALUES (339, 'cust-16 ''quoted'' ü', 28.25, 1, '2024-03-01 13:09:41');
INSERT INTO public.orders VALUES (342, 'cust-17 ''quoted'' ü', 28.50, 0, '2024-03-01 13:10:18');
INSERT INTO public.orders VALUES (345, 'cust-18 ''quoted'' ü', 28.75, 1, NULL);
INSERT INTO public.orders VALUES (348, 'cust-19 ''quoted'' ü', 29.00, 0, '2024-03-01 13:11:32');
INSERT INTO public.orders VALUES (351, 'cust-20 ''quoted'' ü', 29.25, 1, '2024-03-01 13:12:09');
INSERT INTO public.orders VALUES (354, 'cust-21 ''quoted'' ü', 29.50, 0, '2024-03-01 13:12:46');
INSERT INTO public.orders VALUES (357, NULL, 29.75, 1, '2024-03-01 13:13:23');
INSERT INTO public.orders VALUES (360, 'cust-23 ''quoted'' ü', 30.00, 0, '2024-03-01 13:14:00');
INSERT INTO public.orders VALUES (363, 'cust-24 ''quoted'' ü', 30.25, 1, '2024-03-01 13:14:37');
INSERT INTO public.orders VALUES (366, 'cust-25 ''quoted'' ü', 30.50, 0, '2024-03-01 13:15:14');
INSERT INTO public.orders VALUES (369, 'cust-26 ''quoted'' ü', 30.75, 1, '2024-03-01 13:15:51');
INSERT INTO public.orders VALUES (372, 'cust-27 ''quoted'' ü', 31.00, 0, '2024-03-01 13:16:28');
INSERT INTO public.orders VALUES (375, 'cust-28 ''quoted'' ü', 31.25, 1, '2024-03-01 13:17:05');
INSERT INTO public.orders VALUES (378, 'cust-29 ''quoted'' ü', 31.50, 0, '2024-03-01 13:17:42');
INSERT INTO public.orders VALUES (381, 'cust-30 ''quoted'' ü', 31.75, 1, '2024-03-01 13:18:19');
INSERT INTO public.orders VALUES (384, 'cust-31 ''quoted'' ü', 32.00, 0, '2024-03-01 13:18:56');
INSERT INTO public.orders VALUES (387, 'cust-32 ''quoted'' ü', 32.25, 1, '2024-03-01 13:19:33');
INSERT INTO public.orders VALUES (390, 'cust-33 ''quoted'' ü', 32.50, 0, '2024-03-01 13:20:10');
INSERT INTO public.orders VALUES (393, 'cust-34 ''quoted'' ü', 32.75, 1, '2024-03-01 13:20:47');
INSERT INTO public.orders VALUES (396, 'cust-35 ''quoted'' ü', 33.00, 0, '2024-03-01 13:21:24');
INSERT INTO public.orders VALUES (399, 'cust-36 ''quoted'' ü', 33.25, 1, '2024-03-01 13:22:01');
INSERT INTO public.orders VALUES (402, 'cust-37 ''quoted'' ü', 33.50, 0, '2024-03-01 13:22:38');
INSERT INTO public.orders VALUES (405, 'cust-38 ''quoted'' ü', 33.75, 1, '2024-03-01 13:23:15');
INSERT INTO public.orders VALUES (408, NULL, 34.00, 0, '2024-03-01 13:23:52');
INSERT INTO public.orders VALUES (411, 'cust-40 ''quoted'' ü', 34.25, 1, '2024-03-01 13:24:29');
INSERT INTO public.orders VALUES (414, 'cust-41 ''quoted'' ü', 34.50, 0, NULL);
INSERT INTO public.orders VALUES (417, 'cust-42 ''quoted'' ü', 34.75, 1, '2024-03-01 13:25:43');
INSERT INTO public.orders VALUES (420, 'cust-43 ''quoted'' ü', 35.00, 0, '2024-03-01 13:26:20');
INSERT INTO public.orders VALUES (423, 'cust-44 ''quoted'' ü', 35.25, 1, '2024-03-01 13:26:57');
INSERT INTO public.orders VALUES (426, 'cust-45 ''quoted'' ü', 35.50, 0, '2024-03-01 13:27:34');
INSERT INTO public.orders VALUES (429, 'cust-46 ''quoted'' ü', 35.75, 1, '2024-03-01 13:28:11');
INSERT INTO public.orders VALUES (432, 'cust-47 ''quoted'' ü', 36.00, 0, '2024-03-01 13:28:48');
INSERT INTO public.orders VALUES (435, 'cust-48 ''quoted'' ü', 36.25, 1, '2024-03-01 13:29:25');
INSERT INTO public.orders VALUES (438, 'cust-49 ''quoted'' ü', 36.50, 0, '2024-03-01 13:30:02');
INSERT INTO public.orders VALUES (441, 'cust-50 ''quoted'' ü', 36.75, 1, '2024-03-01 13:30:39');
INSERT INTO public.orders VALUES (444, 'cust-51 ''quoted'' ü', 37.00, 0, '2024-03-01 13:31:16');
INSERT INTO public.orders VALUES (447, 'cust-52 ''quoted'' ü', 37.25, 1, '2024-03-01 13:31:53');
INSERT INTO public.orders VALUES (450, 'cust-53 ''quoted'' ü', 37.50, 0, '2024-03-01 13:32:30');
INSERT INTO public.orders VALUES (453, 'cust-54 ''quoted'' ü', 37.75, 1, '2024-03-01 13:33:07');
INSERT INTO public.orders VALUES (456, 'cust-55 ''quoted'' ü', 38.00, 0, '2024-03-01 13:33:44');
INSERT INTO public.orders VALUES (459, NULL, 38.25, 1, '2024-03-01 13:34:21');
INSERT INTO public.orders VALUES (462, 'cust-57 ''quoted'' ü', 38.50, 0, '2024-03-01 13:34:58');
INSERT INTO public.orders VALUES (465, 'cust-58 ''quoted'' ü', 38.75, 1, '2024-03-01 13:35:35');
INSERT INTO public.orders VALUES (468, 'cust-59 ''quoted'' ü', 39.00, 0, '2024-03-01 13:36:12');
INSERT INTO public.orders VALUES (471, 'cust-60 ''quoted'' ü', 39.25, 1, '2024-03-01 13:36:49');
INSERT INTO public.orders VALUES (474, 'cust-61 ''quoted'' ü', 39.50, 0, '2024-03-01 13:37:26');
INSERT INTO public.orders VALUES (477, 'cust-62 ''quoted'' ü', 39.75, 1, '2024-03-01 13:38:03');
INSERT INTO public.orders VALUES (480, 'cust-63 ''quoted'' ü', 40.00, 0, '2024-03-01 13:38:40');
INSERT INTO public.orders VALUES (483, 'cust-64 ''quoted'' ü', 40.25, 1, NULL);
INSERT INTO public.orders VALUES (486, 'cust-65 ''quoted'' ü', 40.50, 0, '2024-03-01 13:39:54');
INSERT INTO public.orders VALUES (489, 'cust-66 ''quoted'' ü', 40.75, 1, '2024-03-01 13:40:31');
INSERT INTO public.orders VALUES (492, 'cust-67 ''quoted'' ü', 41.00, 0, '2024-03-01 13:41:08');
INSERT INTO public.orders VALUES (495, 'cust-68 ''quoted'' ü', 41.25, 1, '2024-03-01 13:41:45');
INSERT INTO public.orders VALUES (498, 'cust-69 ''quoted'' ü', 41.50, 0, '2024-03-01 13:42:22');
INSERT INTO public.orders VALUES (501, 'cust-70 ''quoted'' ü', 41.75, 1, '2024-03-01 13:42:59');
INSERT INTO public.orders VALUES (504, 'cust-71 ''quoted'' ü', 42.00, 0, '2024-03-01 13:43:36');
INSERT INTO public.orders VALUES (507, 'cust-72 ''quoted'' ü', 42.25, 1, '2024-03-01 13:44:13');
INSERT INTO public.orders VALUES (510, NULL, 42.50, 0, '2024-03-01 13:44:50');
INSERT INTO public.orders VALUES (513, 'cust-74 ''quoted'' ü', 42.75, 1, '2024-03-01 13:45:27');
INSERT INTO public.orders VALUES (516, 'cust-75 ''quoted'' ü', 43.00, 0, '2024-03-01 13:46:04');
INSERT INTO public.orders VALUES (519, 'cust-76 ''quoted'' ü', 43.25, 1, '2024-03-01 13:46:41');
INSERT INTO public.orders VALUES (522, 'cust-77 ''quoted'' ü', 43.50, 0, '2024-03-01 13:47:18');
INSERT INTO public.orders VALUES (525, 'cust-78 ''quoted'' ü', 43.75, 1, '2024-03-01 13:47:55');
INSERT INTO public.orders VALUES (528, 'cust-79 ''quoted'' ü', 44.00, 0, '2024-03-01 13:48:32');
INSERT INTO public.orders VALUES (531, 'cust-80 ''quoted'' ü', 44.25, 1, '2024-03-01 13:49:09');
INSERT INTO public.orders VALUES (534, 'cust-81 ''quoted'' ü', 44.50, 0, '2024-03-01 13:49:46');
INSERT INTO public.orders VALUES (537, 'cust-82 ''quoted'' ü', 44.75, 1, '2024-03-01 13:50:23');
INSERT INTO public.orders VALUES (540, 'cust-83 ''quoted'' ü', 45.00, 0, '2024-03-01 13:51:00');
INSERT INTO public.orders VALUES (543, 'cust-84 ''quoted'' ü', 45.25, 1, '2024-03-01 13:51:37');
INSERT INTO public.orders VALUES (546, 'cust-85 ''quoted'' ü', 45.50, 0, '2024-03-01 13:52:14');
INSERT INTO public.orders VALUES (549, 'cust-86 ''quoted'' ü', 45.75, 1, '2024-03-01 13:52:51');
INSERT INTO public.orders VALUES (552, 'cust-87 ''quoted'' ü', 46.00, 0, NULL);
INSERT INTO public.orders VALUES (555, 'cust-88 ''quoted'' ü', 46.25, 1, '2024-03-01 13:54:05');
INSERT INTO public.orders VALUES (558, 'cust-89 ''quoted'' ü', 46.50, 0, '2024-03-01 13:54:42');
INSERT INTO public.orders VALUES (561, NULL, 46.75, 1, '2024-03-01 13:55:19');
INSERT INTO public.orders VALUES (564, 'cust-91 ''quoted'' ü', 47.00, 0, '2024-03-01 13:55:56');
INSERT INTO public.orders VALUES (567, 'cust-92 ''quoted'' ü', 47.25, 1, '2024-03-01 13:56:33');
INSERT INTO public.orders VALUES (570, 'cust-93 ''quoted'' ü', 47.50, 0, '2024-03-01 13:57:10');
INSERT INTO public.orders VALUES (573, 'cust-94 ''quoted'' ü', 47.75, 1, '2024-03-01 13:57:47');
INSERT INTO public.orders VALUES (576, 'cust-95 ''quoted'' ü', 48.00, 0, '2024-03-01 13:58:24');
INSERT INTO public.orders VALUES (579, 'cust-96 ''quoted'' ü', 48.25, 1, '2024-03-01 13:59:01');
INSERT INTO public.orders VALUES (582, 'cust-0 ''quoted'' ü', 48.50, 0, '2024-03-01 13:59:38');
INSERT INTO public.orders VALUES (585, 'cust-1 ''quoted'' ü', 48.75, 1, '2024-03-01 14:00:15');
INSERT INTO public.orders VALUES (588, 'cust-2 ''quoted'' ü', 49.00, 0, '2024-03-01 14:00:52');
INSERT INTO public.orders VALUES (591, 'cust-3 ''quoted'' ü', 49.25, 1, '2024-03-01 14:01:29');
INSERT INTO public.orders VALUES (594, 'cust-4 ''quoted'' ü', 49.50, 0, '2024-03-01 14:02:06');
INSERT INTO public.orders VALUES (597, 'cust-5 ''quoted'' ü', 49.75, 1, '2024-03-01 14:02:43');
INSERT INTO public.orders VALUES (600, 'cust-6 ''quoted'' ü', 50.00, 0, '2024-03-01 14:03:20');
INSERT INTO public.orders VALUES (603, 'cust-7 ''quoted'' ü', 50.25, 1, '2024-03-01 14:03:57');
INSERT INTO public.orders VALUES (606, 'cust-8 ''quoted'' ü', 50.50, 0, '2024-03-01 14:04:34');
INSERT INTO public.orders VALUES (609, 'cust-9 ''quoted'' ü', 50.75, 1, '2024-03-01 14:05:11');
INSERT INTO public.orders VALUES (612, NULL, 51.00, 0, '2024-03-01 14:05:48');
INSERT INTO public.orders VALUES (615, 'cust-11 ''quoted'' ü', 51.25, 1, '2024-03-01 14:06:25');
INSERT INTO public.orders VALUES (618, 'cust-12 ''quoted'' ü', 51.50, 0, '2024-03-01 14:07:02');
INSERT INTO public.orders VALUES (621, 'cust-13 ''quoted'' ü', 51.75, 1, NULL);
INSERT INTO public.orders VALUES (624, 'cust-14 ''quoted'' ü', 52.00, 0, '2024-03-01 14:08:16');
INSERT INTO public.orders VALUES (627, 'cust-15 ''quoted'' ü', 52.25, 1, '2024-03-01 14:08:53');
INSERT INTO public.orders VALUES (630, 'cust-16 ''quoted'' ü', 52.50, 0, '2024-03-01 14:09:30');
INSERT INTO public.orders VALUES (633, 'cust-17 ''quoted'' ü', 52.75, 1, '2024-03-01 14:10:07');
INSERT INTO public.orders VALUES (636, 'cust-18 ''quoted'' ü', 53.00, 0, '2024-03-01 14:10:44');
INSERT INTO public.orders VALUES (639, 'cust-19 ''quoted'' ü', 53.25, 1, '2024-03-01 14:11:21');
INSERT INTO public.orders VALUES (642, 'cust-20 ''quoted'' ü', 53.50, 0, '2024-03-01 14:11:58');
INSERT INTO public.orders VALUES (645, 'cust-21 ''quoted'' ü', 53.75, 1, '2024-03-01 14:12:35');
INSERT INTO public.orders VALUES (648, 'cust-22 ''quoted'' ü', 54.00, 0, '2024-03-01 14:13:12');
INSERT INTO public.orders VALUES (651, 'cust-23 ''quoted'' ü', 54.25, 1, '2024-03-01 14:13:49');
INSERT INTO public.orders VALUES (654, 'cust-24 ''quoted'' ü', 54.50, 0, '2024-03-01 14:14:26');
INSERT INTO public.orders VALUES (657, 'cust-25 ''quoted'' ü', 54.75, 1, '2024-03-01 14:15:03');
INSERT INTO public.orders VALUES (660, 'cust-26 ''quoted'' ü', 55.00, 0, '2024-03-01 14:15:40');
INSERT INTO public.orders VALUES (663, NULL, 55.25, 1, '2024-03-01 14:16:17');
INSERT INTO public.orders VALUES (666, 'cust-28 ''quoted'' ü', 55.50, 0, '2024-03-01 14:16:54');
INSERT INTO public.orders VALUES (669, 'cust-29 ''quoted'' ü', 55.75, 1, '2024-03-01 14:17:31');
INSERT INTO public.orders VALUES (672, 'cust-30 ''quoted'' ü', 56.00, 0, '2024-03-01 14:18:08');
INSERT INTO public.orders VALUES (675, 'cust-31 ''quoted'' ü', 56.25, 1, '2024-03-01 14:18:45');
INSERT INTO public.orders VALUES (678, 'cust-32 ''quoted'' ü', 56.50, 0, '2024-03-01 14:19:22');
INSERT INTO public.orders VALUES (681, 'cust-33 ''quoted'' ü', 56.75, 1, '2024-03-01 14:19:59');
INSERT INTO public.orders VALUES (684, 'cust-34 ''quoted'' ü', 57.00, 0, '2024-03-01 14:20:36');
INSERT INTO public.orders VALUES (687, 'cust-35 ''quoted'' ü', 57.25, 1, '2024-03-01 14:21:13');
INSERT INTO public.orders VALUES (690, 'cust-36 ''quoted'' ü', 57.50, 0, NULL);
INSERT INTO public.orders VALUES (693, 'cust-37 ''quoted'' ü', 57.75, 1, '2024-03-01 14:22:27');
INSERT INTO public.orders VALUES (696, 'cust-38 ''quoted'' ü', 58.00, 0, '2024-03-01 14:23:04');
INSERT INTO public.orders VALUES (699, 'cust-39 ''quoted'' ü', 58.25, 1, '2024-03-01 14:23:41');
INSERT INTO public.orders VALUES (702, 'cust-40 ''quoted'' ü', 58.50, 0, '2024-03-01 14:24:18');
INSERT INTO public.orders VALUES (705, 'cust-41 ''quoted'' ü', 58.75, 1, '2024-03-01 14:24:55');
INSERT INTO public.orders VALUES (708, 'cust-42 ''quoted'' ü', 59.00, 0, '2024-03-01 14:25:32');
INSERT INTO public.orders VALUES (711, 'cust-43 ''quoted'' ü', 59.25, 1, '2024-03-01 14:26:09');
INSERT INTO public.orders VALUES (714, NULL, 59.50, 0, '2024-03-01 14:26:46');
INSERT INTO public.orders VALUES (717, 'cust-45 ''quoted'' ü', 59.75, 1, '2024-03-01 14:27:23');
INSERT INTO public.orders VALUES (720, 'cust-46 ''quoted'' ü', 60.00, 0, '2024-03-01 14:28:00');
INSERT INTO public.orders VALUES (723, 'cust-47 ''quoted'' ü', 60.25, 1, '2024-03-01 14:28:37');
INSERT INTO public.orders VALUES (726, 'cust-48 ''quoted'' ü', 60.50, 0, '2024-03-01 14:29:14');
INSERT INTO public.orders VALUES (729, 'cust-49 ''quoted'' ü', 60.75, 1, '2024-03-01 14:29:51');
INSERT INTO public.orders VALUES (732, 'cust-50 ''quoted'' ü', 61.00, 0, '2024-03-01 14:30:28');
INSERT INTO public.orders VALUES (735, 'cust-51 ''quoted'' ü', 61.25, 1, '2024-03-01 14:31:05');
INSERT INTO public.orders VALUES (738, 'cust-52 ''quoted'' ü', 61.50, 0, '2024-03-01 14:31:42');
INSERT INTO public.orders VALUES (741, 'cust-53 ''quoted'' ü', 61.75, 1, '2024-03-01 14:32:19');
INSERT INTO public.orders VALUES (744, 'cust-54 ''quoted'' ü', 62.00, 0, '2024-03-01 14:32:56');
INSERT INTO public.orders VALUES (747, 'cust-55 ''quoted'' ü', 62.25, 1, '2024-03-01 14:33:33');
INSERT INTO public.orders VALUES (750, 'cust-56 ''quoted'' ü', 62.50, 0, '2024-03-01 14:34:10');
INSERT INTO public.orders VALUES (753, 'cust-57 ''quoted'' ü', 62.75, 1, '2024-03-01 14:34:47');
INSERT INTO public.orders VALUES (756, 'cust-58 ''quoted'' ü', 63.00, 0, '2024-03-01 14:35:24');
INSERT INTO public.orders VALUES (759, 'cust-59 ''quoted'' ü', 63.25, 1, NULL);
INSERT INTO public.orders VALUES (762, 'cust-60 ''quoted'' ü', 63.50, 0, '2024-03-01 14:36:38');
INSERT INTO public.orders VALUES (765, NULL, 63.75, 1, '2024-03-01 14:37:15');
INSERT INTO public.orders VALUES (768, 'cust-62 ''quoted'' ü', 64.00, 0, '2024-03-01 14:37:52');
INSERT INTO public.orders VALUES (771, 'cust-63 ''quoted'' ü', 64.25, 1, '2024-03-01 14:38:29');
INSERT INTO public.orders VALUES (774, 'cust-64 ''quoted'' ü', 64.50, 0, '2024-03-01 14:39:06');
INSERT INTO public.orders VALUES (777, 'cust-65 ''quoted'' ü', 64.75, 1, '2024-03-01 14:39:43');
INSERT INTO public.orders VALUES (780, 'cust-66 ''quoted'' ü', 65.00, 0, '2024-03-01 14:40:20');
INSERT INTO public.orders VALUES (783, 'cust-67 ''quoted'' ü', 65.25, 1, '2024-03-01 14:40:57');
INSERT INTO public.orders VALUES (786, 'cust-68 ''quoted'' ü', 65.50, 0, '2024-03-01 14:41:34');
INSERT INTO public.orders VALUES (789, 'cust-69 ''quoted'' ü', 65.75, 1, '2024-03-01 14:42:11');
INSERT INTO public.orders VALUES (792, 'cust-70 ''quoted'' ü', 66.00, 0, '2024-03-01 14:42:48');
INSERT INTO public.orders VALUES (795, 'cust-71 ''quoted'' ü', 66.25, 1, '2024-03-01 14:43:25');
INSERT INTO public.orders VALUES (798, 'cust-72 ''quoted'' ü', 66.50, 0, '2024-03-01 14:44:02');
INSERT INTO public.orders VALUES (801, 'cust-73 ''quoted'' ü', 66.75, 1, '2024-03-01 14:44:39');
INSERT INTO public.orders VALUES (804, 'cust-74 ''quoted'' ü', 67.00, 0, '2024-03-01 14:45:16');
INSERT INTO public.orders VALUES (807, 'cust-75 ''quoted'' ü', 67.25, 1, '2024-03-01 14:45:53');
INSERT INTO public.orders VALUES (810, 'cust-76 ''quoted'' ü', 67.50, 0, '2024-03-01 14:46:30');
INSERT INTO public.orders VALUES (813, 'cust-77 ''quoted'' ü', 67.75, 1, '2024-03-01 14:47:07');
INSERT INTO public.orders VALUES (816, NULL, 68.00, 0, '2024-03-01 14:47:44');
INSERT INTO public.orders VALUES (819, 'cust-79 ''quoted'' ü', 68.25, 1, '2024-03-01 14:48:21');
INSERT INTO public.orders VALUES (822, 'cust-80 ''quoted'' ü', 68.50, 0, '2024-03-01 14:48:58');
INSERT INTO public.orders VALUES (825, 'cust-81 ''quoted'' ü', 68.75, 1, '2024-03-01 14:49:35');
INSERT INTO public.orders VALUES (828, 'cust-82 ''quoted'' ü', 69.00, 0, NULL);
INSERT INTO public.orders VALUES (831, 'cust-83 ''quoted'' ü', 69.25, 1, '2024-03-01 14:50:49');
INSERT INTO public.orders VALUES (834, 'cust-84 ''quoted'' ü', 69.50, 0, '2024-03-01 14:51:26');
INSERT INTO public.orders VALUES (837, 'cust-85 ''quoted'' ü', 69.75, 1, '2024-03-01 14:52:03');
INSERT INTO public.orders VALUES (840, 'cust-86 ''quoted'' ü', 70.00, 0, '2024-03-01 14:52:40');
INSERT INTO public.orders VALUES (843, 'cust-87 ''quoted'' ü', 70.25, 1, '2024-03-01 14:53:17');
INSERT INTO public.orders VALUES (846, 'cust-88 ''quoted'' ü', 70.50, 0, '2024-03-01 14:53:54');
INSERT INTO public.orders VALUES (849, 'cust-89 ''quoted'' ü', 70.75, 1, '2024-03-01 14:54:31');
INSERT INTO public.orders VALUES (852, 'cust-90 ''quoted'' ü', 71.00, 0, '2024-03-01 14:55:08');
INSERT INTO public.orders VALUES (855, 'cust-91 ''quoted'' ü', 71.25, 1, '2024-03-01 14:55:45');
INSERT INTO public.orders VALUES (858, 'cust-92 ''quoted'' ü', 71.50, 0, '2024-03-01 14:56:22');
INSERT INTO public.orders VALUES (861, 'cust-93 ''quoted'' ü', 71.75, 1, '2024-03-01 14:56:59');
INSERT INTO public.orders VALUES (864, 'cust-94 ''quoted'' ü', 72.00, 0, '2024-03-01 14:57:36');
INSERT INTO public.orders VALUES (867, NULL, 72.25, 1, '2024-03-01 14:58:13');
INSERT INTO public.orders VALUES (870, 'cust-96 ''quoted'' ü', 72.50, 0, '2024-03-01 14:58:50');
INSERT INTO public.orders VALUES (873, 'cust-0 ''quoted'' ü', 72.75, 1, '2024-03-01 14:59:27');
INSERT INTO public.orders VALUES (876, 'cust-1 ''quoted'' ü', 73.00, 0, '2024-03-01 15:00:04');
INSERT INTO public.orders VALUES (879, 'cust-2 ''quoted'' ü', 73.25, 1, '2024-03-01 15:00:41');
INSERT INTO public.orders VALUES (882, 'cust-3 ''quoted'' ü', 73.50, 0, '2024-03-01 15:01:18');
INSERT INTO public.orders VALUES (885, 'cust-4 ''quoted'' ü', 73.75, 1, '2024-03-01 15:01:55');
INSERT INTO public.orders VALUES (888, 'cust-5 ''quoted'' ü', 74.00, 0, '2024-03-01 15:02:32');
INSERT INTO public.orders VALUES (891, 'cust-6 ''quoted'' ü', 74.25, 1, '2024-03-01 15:03:09');
INSERT INTO public.orders VALUES (894, 'cust-7 ''quoted'' ü', 74.50, 0, '2024-03-01 15:03:46');
INSERT INTO public.orders VALUES (897, 'cust-8 ''quoted'' ü', 74.75, 1, NULL);
INSERT INTO public.orders VALUES (900, 'cust-9 ''quoted'' ü', 75.00, 0, '2024-03-01 15:05:00');


--
-- Name: customers customers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.customers
    ADD CONSTRAINT customers_pkey PRIMARY KEY (id);


--
-- Name: orders orders_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.orders
    ADD CONSTRAINT orders_pkey PRIMARY KEY (id);


--
-- PostgreSQL database dump complete
--

\unrestrict P6cDDe20jtcaorlFfcjwFxygxNDa4JHKcxJ8Ev5cjMyCvij5UZZ9M4ryPeIqafj

